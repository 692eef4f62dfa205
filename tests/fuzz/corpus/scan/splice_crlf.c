#def\
ine M(x) he\
lp(x)
