/*
 * Streams and events as the real driver orders them: work issued on a stream (launches,
 * async copies, memsets, event records, graph launches, cuBLAS calls) is queued and runs
 * only when the host waits for it: cuStreamSynchronize, cuEventSynchronize,
 * cuCtxSynchronize, a free of device memory, or a stream that cuStreamWaitEvent made wait
 * for another. A copy from host memory reads it when it runs, a copy to host memory writes
 * it then, so a host buffer reused too early or read before its wait holds the wrong bytes,
 * as it would on a GPU. Failures of queued work are reported by the synchronisation that
 * ran it, and every later call, like the real driver's sticky errors.
 */
#include <cstdint>

#include "fake_state.h"

namespace fake {

Stream legacy;

Stream *queue_of(void *s) { return s == nullptr ? &legacy : stream_of(s); }

uint64_t enqueue(Stream *s, std::function<CUresult()> run) {
  s->queue.push_back(Op{++s->issued, std::move(run)});
  return s->issued;
}

CUresult sync_result() {
  if (!sticky.empty()) return sticky_code;
  return check_canaries();
}

CUresult drain(Stream *s, uint64_t seq) {
  while (!s->queue.empty() && s->queue.front().seq <= seq) {
    Op op = std::move(s->queue.front());
    s->queue.pop_front();
    s->done = op.seq;
    /* After a failure the context is lost: nothing queued behind it runs. */
    if (sticky.empty()) op.run();
  }
  return sync_result();
}

CUresult drain_all() {
  /* Draining one stream can drain others (waits on events): repeat until all are empty. */
  for (bool again = true; again;) {
    again = false;
    drain(&legacy);
    for (Stream *s : streams) {
      if (!s->queue.empty()) {
        drain(s);
        again = true;
      }
    }
  }
  return sync_result();
}

/* Work on the legacy stream first waits for every blocking stream's earlier work. */
static void legacy_waits() {
  for (Stream *s : streams) {
    if (!s->blocking || s->queue.empty()) continue;
    const uint64_t upto = s->issued;
    enqueue(&legacy, [s, upto]() -> CUresult {
      drain(s, upto);
      return OK;
    });
  }
}

CUresult issue(void *stream, std::function<CUresult()> run) {
  Stream *s = queue_of(stream);
  if (s == &legacy) legacy_waits();
  enqueue(s, std::move(run));
  return OK;
}

}  // namespace fake

using namespace fake;

#pragma GCC visibility push(default)
extern "C" {

CUresult cuCtxSynchronize() {
  if (CUresult r = ready()) return r;
  if (CUresult r = unsafe_during_capture()) return r;
  return drain_all();
}

CUresult cuStreamCreate(void **out, unsigned flags) {
  if (CUresult r = ready()) return r;
  if (flags > 1) return E_INVALID_VALUE;
  Stream *s = new Stream();
  s->blocking = flags == 0;
  streams.insert(s);
  *out = s;
  return OK;
}

CUresult cuStreamDestroy_v2(void *stream) {
  if (CUresult r = ready()) return r;
  Stream *s = stream_of(stream);
  if (!s) return E_INVALID_HANDLE;
  /* Queued work still completes on a real GPU; other queues may name this one (waits). */
  drain_all();
  streams.erase(s);
  delete s;
  return OK;
}

CUresult cuStreamSynchronize(void *stream) {
  if (CUresult r = ready()) return r;
  Stream *s = stream_of(stream);
  if (stream != nullptr && !s) return E_INVALID_HANDLE;
  if (s && s->capturing) {
    s->invalidated = true;
    return E_CAPTURE_UNSUPPORTED;
  }
  if (s == nullptr) {
    /* The legacy stream: what it waits for has been queued on it (legacy_waits). */
    return drain(&legacy);
  }
  return drain(s);
}

CUresult cuStreamWaitEvent(void *stream, void *e, unsigned flags) {
  if (CUresult r = ready()) return r;
  Stream *s = queue_of(stream);
  if (!s || !e || flags != 0) return s ? E_INVALID_VALUE : E_INVALID_HANDLE;
  if (s->capturing) {
    s->invalidated = true;
    return E_CAPTURE_UNSUPPORTED;
  }
  const Event *ev = (const Event *)e;
  if (ev->complete || ev->stream == nullptr) return OK;
  Stream *src = ev->stream;
  const uint64_t upto = ev->seq;
  /* The wait is on the record as it is now, not on a later re-record. */
  return issue(stream, [src, upto]() -> CUresult {
    if (src == &legacy || streams.count(src)) drain(src, upto);
    return OK;
  });
}

CUresult cuEventCreate(void **out, unsigned flags) {
  if (CUresult r = ready()) return r;
  (void)flags;
  *out = new Event();
  return OK;
}

CUresult cuEventDestroy_v2(void *e) {
  Event *ev = (Event *)e;
  /* A pending record still completes; it must not write a freed event. */
  if (ev && !ev->complete && ev->stream != nullptr) drain(ev->stream, ev->seq);
  delete ev;
  return OK;
}

CUresult cuEventRecord(void *e, void *stream) {
  if (CUresult r = copy_checks(stream, true)) return r;
  if (!e) return E_INVALID_HANDLE;
  Event *ev = (Event *)e;
  Stream *s = queue_of(stream);
  const uint64_t generation = ++ev->generation;
  ev->recorded = true;
  ev->complete = false;
  ev->stream = s;
  issue(stream, [ev, generation]() -> CUresult {
    if (ev->generation == generation) {
      ev->ms = now_ms();
      ev->complete = true;
    }
    return OK;
  });
  ev->seq = s->issued;
  return OK;
}

CUresult cuEventSynchronize(void *e) {
  if (CUresult r = ready()) return r;
  if (CUresult r = unsafe_during_capture()) return r;
  Event *ev = (Event *)e;
  if (!ev || !ev->recorded) return E_INVALID_HANDLE;
  if (!ev->complete) return drain(ev->stream, ev->seq);
  return sync_result();
}

CUresult cuEventQuery(void *e) {
  if (CUresult r = ready()) return r;
  const Event *ev = (const Event *)e;
  if (!ev) return E_INVALID_HANDLE;
  /* Queued work only runs when waited for: an unwaited record is never ready. */
  return ev->complete ? OK : E_NOT_READY;
}

CUresult cuEventElapsedTime_v2(float *ms, void *a, void *b) {
  if (CUresult r = ready()) return r;
  const Event *ea = (const Event *)a, *eb = (const Event *)b;
  if (!ea->recorded || !eb->recorded) return E_INVALID_HANDLE;
  if (!ea->complete || !eb->complete) return E_NOT_READY;
  *ms = (float)(eb->ms - ea->ms);
  return OK;
}

CUresult cuEventElapsedTime(float *ms, void *a, void *b) { return cuEventElapsedTime_v2(ms, a, b); }

}  // extern "C"
#pragma GCC visibility pop
