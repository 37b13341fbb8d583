/*
 * A stand-in libcuda for machines without a GPU: the driver API subset the CUDA backend
 * calls, running kernels through the emulator. Stricter than the real driver where the
 * backend's design promises more: every call checks that cuInit ran and a context is
 * current; while a stream captures a graph only kernel launches are accepted there;
 * kernels named by cuModuleGetFunction must appear in the loaded image.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fake_state.h"

using namespace fake;

#pragma GCC visibility push(default)
extern "C" {

/* ---- init, devices, contexts ---- */

CUresult cuInit(unsigned flags) {
  if (flags != 0) return E_INVALID_VALUE;
  if (cfg.init_result != 0) return cfg.init_result;
  initialised = true;
  return OK;
}

CUresult cuDriverGetVersion(int *v) {
  if (!v) return E_INVALID_VALUE;
  *v = 13000;
  return OK;
}

CUresult cuDeviceGetCount(int *n) {
  if (!initialised) return E_NOT_INITIALIZED;
  *n = cfg.device_count;
  return OK;
}

CUresult cuDeviceGet(int *d, int ordinal) {
  if (!initialised) return E_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= cfg.device_count) return E_INVALID_DEVICE;
  *d = ordinal;
  return OK;
}

CUresult cuDeviceGetName(char *name, int len, int dev) {
  if (dev < 0 || dev >= cfg.device_count) return E_INVALID_DEVICE;
  std::snprintf(name, (size_t)len, "Neuron Emulated GPU %d", dev);
  return OK;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) {
  if (dev < 0 || dev >= cfg.device_count) return E_INVALID_DEVICE;
  *bytes = (size_t)(cfg.total_mb * 1048576.0);
  return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  if (dev < 0 || dev >= cfg.device_count) return E_INVALID_DEVICE;
  switch (attr) {
    case 75: *v = cfg.cc_major; return OK;
    case 76: *v = cfg.cc_minor; return OK;
    case 16: *v = cfg.sm_count; return OK;
    case 38: *v = 50 * 1024 * 1024; return OK;
    case 97: *v = shared_optin_limit(); return OK;
    case 8: *v = DEFAULT_DYNAMIC_SHARED; return OK;
    case 12: *v = cfg.regs_per_block; return OK;
    case 1: *v = 1024; return OK;
    default: return E_INVALID_VALUE;
  }
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  if (!initialised) return E_NOT_INITIALIZED;
  if (dev < 0 || dev >= cfg.device_count) return E_INVALID_DEVICE;
  ctx_refs++;
  *ctx = &primary_ctx_token;
  return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
  if (dev < 0 || dev >= cfg.device_count) return E_INVALID_DEVICE;
  if (ctx_refs <= 0) return E_INVALID_CONTEXT;
  ctx_refs--;
  return OK;
}

CUresult cuCtxSetCurrent(void *ctx) {
  if (!initialised) return E_NOT_INITIALIZED;
  if (ctx != nullptr && ctx != &primary_ctx_token) return E_INVALID_CONTEXT;
  current_ctx = ctx;
  return OK;
}

/* ---- modules and launches ---- */

CUresult cuModuleLoadDataEx(void **out, const void *image, unsigned n_options, int *options,
                            void **values) {
  (void)n_options, (void)options, (void)values;
  if (CUresult r = ready()) return r;
  if (CUresult r = unsafe_during_capture()) return r;
  if (!image) return E_INVALID_VALUE;
  Module *m = new Module();
  const unsigned char *img = (const unsigned char *)image;
  if (img[0] == 0x7f && img[1] == 'E' && img[2] == 'L' && img[3] == 'F') {
    entries_of_elf(img, m->entries);
    uint32_t flags;
    std::memcpy(&flags, img + 0x30, 4);
    m->arch = (int)((flags >> 8) & 0xff);
  } else if (std::strstr((const char *)image, ".version") != nullptr) {
    entries_of_ptx((const char *)image, m->entries);
    const char *t = std::strstr((const char *)image, ".target sm_");
    m->arch = t ? std::atoi(t + 11) : 0;
  } else {
    delete m;
    return E_INVALID_IMAGE;
  }
  *out = m;
  return OK;
}

CUresult cuModuleUnload(void *mod) {
  if (CUresult r = ready()) return r;
  delete (Module *)mod;
  return OK;
}

CUresult cuModuleGetFunction(void **out, void *mod, const char *name) {
  if (CUresult r = ready()) return r;
  Module *m = (Module *)mod;
  if (!m || !name) return E_INVALID_VALUE;
  if (!m->entries.count(name)) return E_NOT_FOUND;
  const EmuKernel *k = emu_find_kernel(name);
  if (!k) {
    std::fprintf(stderr, "fake libcuda: %s is in the image but not registered (EXPORT_KERNEL)\n",
                 name);
    return E_NOT_FOUND;
  }
  const EmuLimits *limits = limits_of(m->arch, name);
  if (!limits && m->arch != 0) {
    /* An image built for a GPU whose numbers the table lacks: its launches cannot be checked. */
    std::fprintf(stderr, "fake libcuda: no launch limits for %s on sm_%d (kernel_limits.ts)\n",
                 name, m->arch);
    return E_NOT_FOUND;
  }
  *out = new Function{k, limits};
  return OK;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shmem, void *stream, void **params,
                        void **extra) {
  if (CUresult r = ready()) return r;
  if (!sticky.empty()) return sticky_code;
  if (!f || extra != nullptr) return E_INVALID_VALUE;
  const EmuKernel *k = ((Function *)f)->kernel;
  if (gx == 0 || gy == 0 || gz == 0 || gx > 2147483647u || gy > 65535 || gz > 65535)
    return E_INVALID_VALUE;
  if (bx == 0 || by == 0 || bz == 0 || bx > 1024 || by > 1024 || bz > 64 ||
      (unsigned long)bx * by * bz > 1024)
    return E_INVALID_VALUE;
  if (CUresult r = launch_limits(*(const Function *)f, bx * by * bz, shmem)) return r;
  if (!k->sizes.empty() && !params) return E_INVALID_VALUE;
  Stream *s = stream_of(stream);
  if (stream != nullptr && !s) return E_INVALID_HANDLE;
  Node n{k, dim3{gx, gy, gz}, dim3{bx, by, bz}, {}};
  for (size_t i = 0; i < k->sizes.size(); i++) {
    const char *p = (const char *)params[i];
    n.params.emplace_back(p, p + k->sizes[i]);
  }
  if (s && s->capturing) {
    s->nodes.push_back(std::move(n));
    return OK;
  }
  return issue(stream, [n = std::move(n)]() -> CUresult { return run_node(n); });
}

/* ---- graphs ---- */

CUresult cuStreamBeginCapture_v2(void *stream, int mode) {
  if (CUresult r = ready()) return r;
  Stream *s = stream_of(stream);
  if (!s) return E_INVALID_HANDLE;
  if (s->capturing || mode < 0 || mode > 2) return E_INVALID_VALUE;
  s->capturing = true;
  s->invalidated = false;
  s->nodes.clear();
  return OK;
}

CUresult cuStreamEndCapture(void *stream, void **graph) {
  if (CUresult r = ready()) return r;
  Stream *s = stream_of(stream);
  if (!s) return E_INVALID_HANDLE;
  if (!s->capturing) return E_CAPTURE_UNMATCHED;
  s->capturing = false;
  if (s->invalidated) {
    s->nodes.clear();
    *graph = nullptr;
    return E_CAPTURE_INVALIDATED;
  }
  Graph *g = new Graph();
  g->nodes = std::make_shared<const std::vector<Node>>(std::move(s->nodes));
  s->nodes.clear();
  *graph = g;
  stats.captures++;
  return OK;
}

CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
  if (CUresult r = ready()) return r;
  if (!graph || flags != 0) return E_INVALID_VALUE;
  Graph *e = new Graph(*(Graph *)graph);
  *exec = e;
  return OK;
}

CUresult cuGraphLaunch(void *exec, void *stream) {
  if (CUresult r = ready()) return r;
  if (!sticky.empty()) return sticky_code;
  Stream *s = stream_of(stream);
  if (stream != nullptr && !s) return E_INVALID_HANDLE;
  if (s && s->capturing) return E_CAPTURE_UNSUPPORTED;
  stats.graph_launches++;
  return issue(stream, [nodes = ((Graph *)exec)->nodes]() -> CUresult {
    for (const Node &n : *nodes) {
      stats.graph_nodes++;
      if (CUresult r = run_node(n)) return r;
    }
    return OK;
  });
}

CUresult cuGraphExecDestroy(void *exec) {
  delete (Graph *)exec;
  return OK;
}

CUresult cuGraphDestroy(void *graph) {
  delete (Graph *)graph;
  return OK;
}

/* ---- errors ---- */

CUresult cuGetErrorName(CUresult code, const char **out) {
  static const std::map<int, const char *> names = {
      {0, "CUDA_SUCCESS"},
      {1, "CUDA_ERROR_INVALID_VALUE"},
      {2, "CUDA_ERROR_OUT_OF_MEMORY"},
      {3, "CUDA_ERROR_NOT_INITIALIZED"},
      {100, "CUDA_ERROR_NO_DEVICE"},
      {101, "CUDA_ERROR_INVALID_DEVICE"},
      {200, "CUDA_ERROR_INVALID_IMAGE"},
      {201, "CUDA_ERROR_INVALID_CONTEXT"},
      {400, "CUDA_ERROR_INVALID_HANDLE"},
      {500, "CUDA_ERROR_NOT_FOUND"},
      {600, "CUDA_ERROR_NOT_READY"},
      {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
      {716, "CUDA_ERROR_MISALIGNED_ADDRESS"},
      {719, "CUDA_ERROR_LAUNCH_FAILED"},
      {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
      {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
      {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"},
  };
  auto it = names.find(code);
  if (it == names.end()) {
    *out = nullptr;
    return E_INVALID_VALUE;
  }
  *out = it->second;
  return OK;
}

CUresult cuGetErrorString(CUresult code, const char **out) {
  if (!sticky.empty() && code == sticky_code) {
    *out = sticky.c_str();
    return OK;
  }
  return cuGetErrorName(code, out);
}

}  // extern "C"
#pragma GCC visibility pop
