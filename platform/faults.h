/* faults.h: the fault-injection build's seam (configure.py --mode faults defines
 * ZC_PLAT_FAULTS). posix.c includes it first with ZC_PX_RENAME defined, so that its
 * implementations of the platform calls that can fail are compiled as zc_px_real_NAME (and
 * checked against the prototypes below); platform/faults.c defines the public zc_plat_NAME in
 * front of them, counting calls and failing the chosen one. Other builds never see this
 * file. */
#ifndef ZC_PLAT_FAULTS_H
#define ZC_PLAT_FAULTS_H

#ifdef ZC_PX_RENAME
#define zc_plat_shm_create zc_px_real_shm_create
#define zc_plat_shm_open zc_px_real_shm_open
#define zc_plat_shm_seal zc_px_real_shm_seal
#define zc_plat_shm_unmap zc_px_real_shm_unmap
#define zc_plat_pages_alloc zc_px_real_pages_alloc
#define zc_plat_pages_free zc_px_real_pages_free
#define zc_plat_tcp_listen zc_px_real_tcp_listen
#define zc_plat_tcp_accept zc_px_real_tcp_accept
#define zc_plat_tcp_connect zc_px_real_tcp_connect
#define zc_plat_tcp_send_all zc_px_real_tcp_send_all
#define zc_plat_tcp_recv_all zc_px_real_tcp_recv_all
#define zc_plat_tcp_recv_some zc_px_real_tcp_recv_some
#define zc_plat_tcp_local_host zc_px_real_tcp_local_host
#define zc_plat_random zc_px_real_random
#define zc_plat_host_id zc_px_real_host_id
#define zc_plat_process_alive zc_px_real_process_alive
#define zc_plat_mem_room zc_px_real_mem_room
#define zc_plat_read_file zc_px_real_read_file
#endif

#include "platform.h"

zc_plat_rc zc_px_real_shm_create(const char *name, size_t bytes, void **addr_out,
                                 zc_plat_shm_ref *ref_out);
zc_plat_rc zc_px_real_shm_open(const zc_plat_shm_ref *ref, size_t bytes, void **addr_out);
zc_plat_rc zc_px_real_shm_seal(zc_plat_shm_ref *ref);
zc_plat_rc zc_px_real_shm_unmap(void *addr, size_t bytes);
zc_plat_rc zc_px_real_pages_alloc(size_t bytes, void **addr_out);
zc_plat_rc zc_px_real_pages_free(void *addr, size_t bytes);
zc_plat_rc zc_px_real_tcp_listen(const char *host, uint16_t port, int *sock_out,
                                 uint16_t *port_out);
zc_plat_rc zc_px_real_tcp_accept(int listen_sock, uint64_t deadline_ns, int *sock_out);
zc_plat_rc zc_px_real_tcp_connect(const char *host, uint16_t port, uint64_t deadline_ns,
                                  int *sock_out);
zc_plat_rc zc_px_real_tcp_send_all(int sock, const void *buf, size_t bytes,
                                   uint64_t deadline_ns);
zc_plat_rc zc_px_real_tcp_recv_all(int sock, void *buf, size_t bytes, uint64_t deadline_ns);
zc_plat_rc zc_px_real_tcp_recv_some(int sock, void *buf, size_t cap, size_t *got_out);
zc_plat_rc zc_px_real_tcp_local_host(int sock, char *buf, size_t cap);
zc_plat_rc zc_px_real_random(void *buf, size_t bytes);
zc_plat_rc zc_px_real_host_id(char *buf, size_t cap);
zc_plat_rc zc_px_real_process_alive(uint64_t pid);
zc_plat_rc zc_px_real_mem_room(zc_plat_room *out);
zc_plat_rc zc_px_real_read_file(const char *path, void *buf, size_t cap, size_t *len_out);

/* Sets posix.c's per-thread OS error, as a failed call would. */
void zc_px_set_os_error(int os_error);

#endif
