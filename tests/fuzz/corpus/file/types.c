struct S { int a; };
union U { int a; float b; };
enum E { A, B };
typedef float (*fn)(float);
static const float t[4] = {1, 2, 3, 4};
__constant float c = 2.0f;
