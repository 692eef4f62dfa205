/* SPDX-License-Identifier: MIT */
/* kit.h -- the one container kit every table in the tree uses: an
 * intrusive chained hash table, intrusive lists and grow-arrays. Typed by
 * macros (the node type and its link field are arguments), so nodes need
 * no casts and no common header; memory comes from a kc__heap.
 *
 *   hash table  KC__HTAB(T) t;   T has a `T *link` field. Capacity is a
 *               power of two, grown (doubled) to keep count <= cap.
 *               KC__HTAB_FOR(&t, h, T, x, link) { ... }   the chain of h
 *               kc__htab_reserve(heap, &t, T, link, hashof, first, &ok)
 *               KC__HTAB_PUT(&t, x, h, link)              after reserve
 *               KC__HTAB_EACH(&t, T, x, link)  every node, x may be freed
 *               KC__HTAB_DROP_IF(&t, T, x, link, cond, stmt)  unlinks some
 *   list        KC__LIST_PUSH(head, x) / KC__LIST_REMOVE(head, x): a
 *               doubly linked list through x->prev and x->next
 *               KC__STACK_PUSH(head, x, link) / KC__STACK_POP(head, x, link)
 *   grow-array  KC__GROW(heap, arr, cap, need, first, &ok): room for `need`
 *               elements (capacity doubled from `first`); ok false when
 *               out of memory, the array unchanged.
 */
#ifndef KC_BASE_KIT_H
#define KC_BASE_KIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mem.h"

/* ------------------------------------------------------------ hash table */

#define KC__HTAB(T) \
  struct { \
    T **slots; \
    size_t count, cap; \
  }

/* The bucket of hash h in a table of capacity cap (a power of two). The
 * multiply mixes sequential keys (ids) as well as string hashes. */
static inline size_t kc__htab_bucket(uint64_t h, size_t cap) {
  return (size_t)((h * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

#define KC__HTAB_FOR(t, h, T, x, link) \
  for (T *x = (t)->cap ? (t)->slots[kc__htab_bucket((h), (t)->cap)] : NULL; x; x = x->link)

/* Every node; the body may free x (the next one is read first). */
#define KC__HTAB_EACH(t, T, x, link) \
  for (size_t kc__i_##x = 0; kc__i_##x < (t)->cap; kc__i_##x++) \
    for (T *x = (t)->slots[kc__i_##x], *kc__n_##x = x ? x->link : NULL; x; \
         x = kc__n_##x, kc__n_##x = x ? x->link : NULL)

/* Room for one more node: doubles the capacity (from `first`) when count
 * would pass it, rehashing with hashof(node). *ok false: out of memory, the
 * table unchanged. */
#define kc__htab_reserve(heap, t, T, link, hashof, first, ok) \
  do { \
    *(ok) = true; \
    if ((t)->count + 1 > (t)->cap) { \
      size_t kc__nc_ = (t)->cap ? (t)->cap * 2 : (first); \
      T **kc__ns_ = kc__heap_calloc((heap), kc__nc_ * sizeof *kc__ns_); \
      if (!kc__ns_) { \
        *(ok) = false; \
      } else { \
        KC__HTAB_EACH(t, T, kc__x_, link) { \
          size_t kc__s_ = kc__htab_bucket(hashof(kc__x_), kc__nc_); \
          kc__x_->link = kc__ns_[kc__s_]; \
          kc__ns_[kc__s_] = kc__x_; \
        } \
        kc__heap_free((heap), (t)->slots); \
        (t)->slots = kc__ns_; \
        (t)->cap = kc__nc_; \
      } \
    } \
  } while (0)

/* Adds x with hash h (after a successful reserve). */
#define KC__HTAB_PUT(t, x, h, link) \
  do { \
    size_t kc__s_ = kc__htab_bucket((h), (t)->cap); \
    (x)->link = (t)->slots[kc__s_]; \
    (t)->slots[kc__s_] = (x); \
    (t)->count++; \
  } while (0)

/* Unlinks every node x for which cond holds, then runs `dropped` (which
 * may free x). */
#define KC__HTAB_DROP_IF(t, T, x, link, cond, dropped) \
  for (size_t kc__i_ = 0; kc__i_ < (t)->cap; kc__i_++) \
    for (T **kc__pl_ = &(t)->slots[kc__i_], *x; (x = *kc__pl_) != NULL;) \
      if (!(cond)) { \
        kc__pl_ = &x->link; \
      } else { \
        *kc__pl_ = x->link; \
        (t)->count--; \
        dropped; \
      }

/* Frees the bucket array (not the nodes). */
#define KC__HTAB_FREE(heap, t) \
  do { \
    kc__heap_free((heap), (t)->slots); \
    (t)->slots = NULL; \
    (t)->count = (t)->cap = 0; \
  } while (0)

/* ------------------------------------------------------------------ lists */

#define KC__LIST_PUSH(head, x) \
  do { \
    (x)->prev = NULL; \
    (x)->next = (head); \
    if (head) (head)->prev = (x); \
    (head) = (x); \
  } while (0)

#define KC__LIST_REMOVE(head, x) \
  do { \
    if ((x)->prev) (x)->prev->next = (x)->next; \
    else (head) = (x)->next; \
    if ((x)->next) (x)->next->prev = (x)->prev; \
  } while (0)

/* The same on a second list that x is on: its links are the prev and next
 * of the member `link`. */
#define KC__LIST_PUSH_AT(head, x, link) \
  do { \
    (x)->link.prev = NULL; \
    (x)->link.next = (head); \
    if (head) (head)->link.prev = (x); \
    (head) = (x); \
  } while (0)

#define KC__LIST_REMOVE_AT(head, x, link) \
  do { \
    if ((x)->link.prev) (x)->link.prev->link.next = (x)->link.next; \
    else (head) = (x)->link.next; \
    if ((x)->link.next) (x)->link.next->link.prev = (x)->link.prev; \
  } while (0)

#define KC__STACK_PUSH(head, x, link) \
  do { \
    (x)->link = (head); \
    (head) = (x); \
  } while (0)

/* x = the top (NULL when empty), taken off. */
#define KC__STACK_POP(head, x, link) \
  do { \
    (x) = (head); \
    if (x) (head) = (x)->link; \
  } while (0)

/* ------------------------------------------------------------ grow-arrays */

/* arr (elem-byte elements, capacity *cap) with room for need elements:
 * arr itself when it has it, else a larger copy (capacity doubled from
 * first, *cap updated); NULL when out of memory (arr and *cap unchanged). */
void *kc__grow_array(const kc__heap *heap, void *arr, size_t *cap, size_t need, size_t elem, size_t first);
#define KC__GROW(heap, arr, cap, need, first, ok) \
  do { \
    void *kc__g_ = kc__grow_array((heap), (arr), &(cap), (need), sizeof *(arr), (first)); \
    *(ok) = kc__g_ != NULL; \
    if (kc__g_) (arr) = kc__g_; \
  } while (0)

#endif /* KC_BASE_KIT_H */
