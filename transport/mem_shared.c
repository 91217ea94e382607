/* SPDX-License-Identifier: MIT
 * The reference-counted lists behind shared exports (mem_reg.c) and shared mappings (ipc.c):
 * lookups take a reference under the list's lock, and the last reference unlists the object. */
#include "mem_int.h"

pcl_mem_shared_t *pcl_mem_shared_find(pcl_mem_shared_list_t *l,
                                      int (*match)(const pcl_mem_shared_t *o, const void *key),
                                      const void *key) {
  pcl_mem_shared_t *o;
  pthread_mutex_lock(&l->lock);
  for (o = l->head; o != NULL && !match(o, key); o = o->next)
    ;
  if (o != NULL)
    o->refs++;
  pthread_mutex_unlock(&l->lock);
  return o;
}

void pcl_mem_shared_add(pcl_mem_shared_list_t *l, pcl_mem_shared_t *o) {
  o->refs = 1;
  pthread_mutex_lock(&l->lock);
  o->next = l->head;
  l->head = o;
  l->n++;
  pthread_mutex_unlock(&l->lock);
}

int pcl_mem_shared_put(pcl_mem_shared_list_t *l, pcl_mem_shared_t *o) {
  pthread_mutex_lock(&l->lock);
  int last = --o->refs == 0;
  if (last) {
    pcl_mem_shared_t **pp = &l->head;
    while (*pp != o)
      pp = &(*pp)->next;
    *pp = o->next;
    l->n--;
  }
  pthread_mutex_unlock(&l->lock);
  return last;
}

int pcl_mem_shared_count(pcl_mem_shared_list_t *l) {
  pthread_mutex_lock(&l->lock);
  int n = l->n;
  pthread_mutex_unlock(&l->lock);
  return n;
}
