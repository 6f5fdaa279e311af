/*
 * apt-bdl's sessions: NBD (one libnbd handle per session) and iSCSI (one libiscsi context and
 * normal session per session, session i logging in as IQN-PREFIX:i), both asynchronous, behind
 * the session_* calls of bdl.h.
 *
 * iSCSI login keys: header digest None, ImmediateData=No, InitialR2T=Yes (as the paper's
 * Open-iSCSI). libiscsi 1.19 has no setter for MaxBurstLength: it always offers 262144, and the
 * negotiated value is the minimum of both sides, so 16 MiB cannot be had (a 128 KiB piece is
 * one burst anyway). libiscsi sets TCP_NODELAY; we set it on NBD sockets too.
 */
#include "bdl.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* ---- reads ---------------------------------------------------------------------------------- */

static int nbd_done(void *user_data, int *error) {
    struct piece *p = user_data;
    char msg[128];
    if (*error) snprintf(msg, sizeof msg, "read failed: %s", strerror(*error));
    complete(p, *error ? msg : NULL);
    return 1; /* retire the command */
}

static void iscsi_done(struct iscsi_context *isc, int status, void *data, void *user_data) {
    struct piece *p = user_data;
    if (data) scsi_free_scsi_task(data);
    complete(p, status == SCSI_STATUS_GOOD ? NULL : iscsi_get_error(isc));
}

void session_read(struct bdl *b, struct session *s, struct piece *p, uint64_t off, uint64_t len) {
    if (b->iscsi) {
        p->iov = (struct scsi_iovec){.iov_base = p->buf, .iov_len = len};
        if (!iscsi_read16_iov_task(s->isc, b->url->lun, off / b->block, (uint32_t)len, (int)b->block, 0, 0, 0,
                                   0, 0, iscsi_done, p, &p->iov, 1))
            complete(p, iscsi_get_error(s->isc));
    } else {
        nbd_completion_callback cb = {.callback = nbd_done, .user_data = p};
        if (nbd_aio_pread(s->nbd, p->buf, len, off, cb, 0) == -1) complete(p, nbd_get_error());
    }
}

/* ---- connecting and closing ------------------------------------------------------------------ */

static void capacity_done(struct iscsi_context *isc, int status, void *data, void *user_data) {
    struct session *s = user_data;
    struct bdl *b = s->b;
    struct scsi_readcapacity16 *rc = status == SCSI_STATUS_GOOD ? scsi_datain_unmarshall(data) : NULL;
    if (rc && rc->block_length) {
        b->block = rc->block_length;
        b->size = (rc->returned_lba + 1) * rc->block_length;
        s->st = S_READY;
    } else {
        fail(s, status == SCSI_STATUS_GOOD ? "READ CAPACITY(16) returned no data" : iscsi_get_error(isc));
    }
    if (data) scsi_free_scsi_task(data);
}

static void connect_done(struct iscsi_context *isc, int status, void *data, void *user_data) {
    struct session *s = user_data;
    struct bdl *b = s->b;
    (void)data;
    if (s->st != S_CONNECTING) {
        if (status != SCSI_STATUS_GOOD && !b->quitting) fail(s, iscsi_get_error(isc));
        return;
    }
    if (status != SCSI_STATUS_GOOD) return fail(s, iscsi_get_error(isc));
    if (s->idx != 0) {
        s->st = S_READY;
        return;
    }
    s->st = S_CAPACITY;
    if (!iscsi_readcapacity16_task(isc, b->url->lun, capacity_done, s)) fail(s, iscsi_get_error(isc));
}

static void logout_done(struct iscsi_context *isc, int status, void *data, void *user_data) {
    (void)isc, (void)status, (void)data;
    ((struct session *)user_data)->st = S_CLOSED;
}

void session_start(struct bdl *b, struct session *s) {
    if (b->iscsi) {
        char name[256];
        snprintf(name, sizeof name, "%s:%d", b->initiator, s->idx);
        if (!(s->isc = iscsi_create_context(name))) return fail(s, "cannot create an iSCSI context");
        iscsi_set_targetname(s->isc, b->url->target);
        iscsi_set_session_type(s->isc, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(s->isc, ISCSI_HEADER_DIGEST_NONE);
        iscsi_set_immediate_data(s->isc, ISCSI_IMMEDIATE_DATA_NO);
        iscsi_set_initial_r2t(s->isc, ISCSI_INITIAL_R2T_YES);
        iscsi_set_noautoreconnect(s->isc, 1); /* a lost session must surface, not be re-established */
        if (iscsi_full_connect_async(s->isc, b->url->portal, b->url->lun, connect_done, s))
            fail(s, iscsi_get_error(s->isc));
    } else {
        if (!(s->nbd = nbd_create())) return fail(s, nbd_get_error());
        nbd_set_uri_allow_transports(s->nbd, LIBNBD_ALLOW_TRANSPORT_TCP);
        if (nbd_aio_connect_uri(s->nbd, b->uri) == -1) fail(s, nbd_get_error());
    }
}

/* poll events for one session, -1 when it has no socket to watch */
int session_events(struct bdl *b, struct session *s, int *fd) {
    if (s->st == S_FAILED || s->st == S_CLOSED) return -1;
    if (b->iscsi) {
        *fd = iscsi_get_fd(s->isc);
        return *fd < 0 ? -1 : iscsi_which_events(s->isc) | POLLRDHUP;
    }
    *fd = nbd_aio_get_fd(s->nbd);
    unsigned dir = nbd_aio_get_direction(s->nbd);
    if (*fd < 0) return -1;
    return (dir & LIBNBD_AIO_DIRECTION_READ ? POLLIN : 0) | (dir & LIBNBD_AIO_DIRECTION_WRITE ? POLLOUT : 0);
}

void session_service(struct bdl *b, struct session *s, short revents) {
    if (b->iscsi) {
        if (iscsi_service(s->isc, revents & ~POLLRDHUP) < 0 && !b->quitting)
            fail(s, iscsi_get_error(s->isc));
        /* with auto-reconnect off libiscsi only cancels the tasks; an idle session would go unnoticed */
        if ((revents & (POLLHUP | POLLERR | POLLRDHUP)) && !b->quitting && s->st != S_FAILED)
            fail(s, (revents & POLLRDHUP) ? "the target closed the connection" : iscsi_get_error(s->isc));
        if (b->quitting && (revents & (POLLHUP | POLLERR | POLLRDHUP))) s->st = S_CLOSED;
        return;
    }
    int r = 0;
    if (revents & (POLLIN | POLLHUP | POLLERR)) r = nbd_aio_notify_read(s->nbd);
    else if (revents & POLLOUT) r = nbd_aio_notify_write(s->nbd);
    if (r == -1 && !b->quitting) { /* the connection's error says more than the reads' ESHUTDOWN */
        s->err[0] = 0;
        fail(s, nbd_get_error());
    }
    if (b->quitting && (nbd_aio_is_closed(s->nbd) || nbd_aio_is_dead(s->nbd))) s->st = S_CLOSED;
    else if (!b->quitting && s->st != S_FAILED && (nbd_aio_is_dead(s->nbd) || nbd_aio_is_closed(s->nbd)))
        fail(s, "the server closed the connection");
}

/* NBD sessions are ready when libnbd says so (iSCSI's callbacks set the state themselves). */
void session_check_connect(struct bdl *b, struct session *s) {
    if (b->iscsi || s->st != S_CONNECTING) return;
    if (nbd_aio_is_ready(s->nbd)) s->st = S_READY;
    else if (nbd_aio_is_dead(s->nbd) || nbd_aio_is_closed(s->nbd)) fail(s, nbd_get_error());
}

/* Every session is open: learn the device (iSCSI did in capacity_done) and tune the sockets. */
void sessions_opened(struct bdl *b) {
    if (b->iscsi) return;
    int64_t size = nbd_get_size(b->ss[0].nbd);
    b->size = size < 0 ? 0 : (uint64_t)size;
    b->block = 1;
    b->multi_conn = nbd_can_multi_conn(b->ss[0].nbd) == 1;
    for (int i = 0; i < b->n; i++) {
        int one = 1, fd = nbd_aio_get_fd(b->ss[i].nbd);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* as libiscsi does */
    }
}

/* Start a clean disconnect; nonzero when it could not start (the session counts as closed). */
int session_close(struct bdl *b, struct session *s) {
    return b->iscsi ? iscsi_logout_async(s->isc, logout_done, s) : nbd_aio_disconnect(s->nbd, 0);
}

void session_destroy(struct bdl *b, struct session *s) {
    if (b->iscsi) iscsi_destroy_context(s->isc);
    else nbd_close(s->nbd);
}
