/*
 * apt-bdl's shared types: the layer (struct bdl), its sessions and in-flight pieces. bdl.c is the
 * layer (options, striping, the poll loop, the output protocol); session.c speaks NBD (libnbd) and
 * iSCSI (libiscsi) behind the session_* calls, so the layer never asks which protocol it runs.
 */
#ifndef APT_BDL_H
#define APT_BDL_H
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>
#include <libnbd.h>

#define MAX_SESSIONS 1024
#define QUIT_DRAIN_MS 5000 /* how long "quit" waits for in-flight pieces and clean disconnects */

enum state { S_CONNECTING, S_CAPACITY, S_READY, S_CLOSING, S_CLOSED, S_FAILED };

struct bdl;
struct request {
    uint32_t pieces_left;
    int all_issued;
    struct request *next_free;
};
struct session {
    struct bdl *b;
    int idx;
    enum state st;
    struct nbd_handle *nbd;
    struct iscsi_context *isc;
    uint64_t bytes, inflight;
    int64_t waiting_since; /* the last completion, or when reads went out to an idle session */
    int fd, ev;            /* the socket and events registered with epoll (ev -1: not registered) */
    char err[512];
};
struct piece {
    struct bdl *b;
    struct session *s;
    struct request *req;
    uint32_t len;
    unsigned char *buf;
    struct scsi_iovec iov;
    struct piece *next_free;
};
struct bdl {
    /* options */
    int iscsi, n, active;
    const char *uri, *initiator;
    uint64_t stripe, request, readahead;
    long report_ms, connect_timeout_ms, stall_ms;
    /* state */
    struct iscsi_url *url;
    struct session *ss;
    int epfd;
    struct piece *pieces, *free_pieces;
    struct request *reqs, *free_reqs, *cur_req;
    uint64_t cur_req_left, size, offset, inflight, requests_done, buf_size;
    uint32_t block;
    int next_rr, quitting, stdin_open, stdin_plain, multi_conn;
    int64_t t0, next_report;
    char line[512];
    size_t line_len;
};

extern volatile sig_atomic_t got_signal;

/* bdl.c */
int64_t now_ns(void);
void fail(struct session *s, const char *msg);
void complete(struct piece *p, const char *err);

/* session.c */
void session_start(struct bdl *b, struct session *s);
void session_check_connect(struct bdl *b, struct session *s);
void sessions_opened(struct bdl *b);
int session_events(struct bdl *b, struct session *s, int *fd);
void session_service(struct bdl *b, struct session *s, short revents);
void session_read(struct bdl *b, struct session *s, struct piece *p, uint64_t off, uint64_t len);
int session_close(struct bdl *b, struct session *s);
void session_destroy(struct bdl *b, struct session *s);

#endif
