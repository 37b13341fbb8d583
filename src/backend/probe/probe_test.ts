import { assert, assertEquals } from "../../../tests/support/assert.ts";
import { cuResultName } from "../cuda/cu_result.ts";
import { cudaVersionString } from "./cuda.ts";
import { DeviceProbe } from "./probe.ts";

/**
 * Real GPUs are tested on GPU hosts; here stand-in libcuda/libnvidia-ml libraries built from
 * C check the FFI marshalling (out-parameters, strings, structs, PCI-bus matching) and the
 * failure paths, on any machine with a C compiler.
 */

const FAKE_CUDA = `
#include <string.h>
#include <stddef.h>
#ifndef INIT_RESULT
#define INIT_RESULT 0
#endif
int cuInit(unsigned f) { return INIT_RESULT; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuDeviceGetCount(int *n) { *n = 2; return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return 0; }
int cuDeviceGetName(char *s, int len, int d) {
  strncpy(s, d == 0 ? "Fake GPU Zero" : "Fake GPU One", len); return 0; }
int cuDeviceTotalMem_v2(size_t *b, int d) { *b = (size_t)(d + 1) * 24576 * 1048576; return 0; }
int cuDeviceGetAttribute(int *v, int attr, int d) {
  if (attr == 75) { *v = d == 0 ? 8 : 12; return 0; }
  if (attr == 76) { *v = d == 0 ? 9 : 0; return 0; }
  return 1; }
int cuDeviceGetPCIBusId(char *s, int len, int d) {
  strncpy(s, d == 0 ? "0000:81:00.0" : "0000:01:00.0", len); return 0; }
`;

const FAKE_NVML = `
#include <string.h>
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned gpu, memory; } util_t;
int nvmlInit_v2(void) { return 0; }
int nvmlSystemGetDriverVersion(char *s, unsigned len) { strncpy(s, "580.95", len); return 0; }
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **h) {
  /* NVML orders by bus id, CUDA here does not: device 1 (bus 01) is NVML's handle 1. */
  if (strcmp(bus, "0000:01:00.0") == 0) { *h = (void *)1; return 0; }
  if (strcmp(bus, "0000:81:00.0") == 0) { *h = (void *)2; return 0; }
  return 2; }
int nvmlDeviceGetMemoryInfo(void *h, mem_t *m) {
  unsigned long long mib = 1048576ULL;
  m->total = 24576 * mib; m->used = (h == (void *)2 ? 1000 : 3000) * mib;
  m->free = m->total - m->used; return 0; }
int nvmlDeviceGetUtilizationRates(void *h, util_t *u) { u->gpu = h == (void *)2 ? 7 : 93; u->memory = 1; return 0; }
int nvmlDeviceGetTemperature(void *h, int sensor, unsigned *t) { *t = h == (void *)2 ? 41 : 77; return 0; }
`;

async function build(dir: string, name: string, source: string, defines: string[] = []) {
  await Deno.writeTextFile(`${dir}/${name}.c`, source);
  const out = await new Deno.Command("cc", {
    args: ["-shared", "-fPIC", "-o", `${dir}/${name}.so`, `${dir}/${name}.c`, ...defines],
    stderr: "piped",
  }).output();
  assert(out.success, new TextDecoder().decode(out.stderr));
  return `${dir}/${name}.so`;
}

Deno.test("CUresult numbers map to cuda.h names", () => {
  assertEquals(cuResultName(0), "CUDA_SUCCESS");
  assertEquals(cuResultName(100), "CUDA_ERROR_NO_DEVICE");
  assertEquals(cuResultName(34), "CUDA_ERROR_STUB_LIBRARY");
  assertEquals(cuResultName(803), "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH");
  assertEquals(cuResultName(999), "CUDA_ERROR_UNKNOWN");
  assertEquals(cuResultName(4242), "CUresult 4242");
  assertEquals(cudaVersionString(13000), "13.0");
  assertEquals(cudaVersionString(12080), "12.8");
});

Deno.test("absent libraries: no devices, null versions, no reason", () => {
  const probe = DeviceProbe.open({
    libcuda: "/nonexistent/libcuda.so.1",
    libnvml: "/nonexistent/libnvidia-ml.so.1",
  });
  assertEquals(probe.discovery(), { cuda_version: null, driver_version: null, devices: [] });
  assertEquals(probe.health(), []);
});

Deno.test("stand-in driver: devices, versions and NVML numbers matched by PCI bus", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const probe = DeviceProbe.open({
      libcuda: await build(dir, "cuda", FAKE_CUDA),
      libnvml: await build(dir, "nvml", FAKE_NVML),
    });
    assertEquals(probe.discovery(), {
      cuda_version: "13.0",
      driver_version: "580.95",
      devices: [
        { index: 0, name: "Fake GPU Zero", vram_total_mb: 24576, compute_capability: "8.9" },
        { index: 1, name: "Fake GPU One", vram_total_mb: 49152, compute_capability: "12.0" },
      ],
    });
    assertEquals(probe.health(), [
      { index: 0, vram_used_mb: 1000, vram_free_mb: 23576, utilization_pct: 7, temp_c: 41 },
      { index: 1, vram_used_mb: 3000, vram_free_mb: 21576, utilization_pct: 93, temp_c: 77 },
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a driver whose cuInit fails: reason set, no devices, never throws", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const lib = await build(dir, "cuda", FAKE_CUDA, ["-DINIT_RESULT=100"]);
    const probe = DeviceProbe.open({ libcuda: lib, libnvml: "/nonexistent/libnvml.so" });
    const d = probe.discovery();
    assertEquals(d.devices, []);
    assertEquals(d.cuda_version, null);
    assertEquals(d.cuda_unavailable_reason, `${lib}: cuInit failed: CUDA_ERROR_NO_DEVICE`);
    assertEquals(probe.health(), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("without NVML, live numbers fall back to zeros and free = total", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const probe = DeviceProbe.open({
      libcuda: await build(dir, "cuda", FAKE_CUDA),
      libnvml: "/nonexistent/libnvml.so",
    });
    assertEquals(probe.discovery().driver_version, null);
    assertEquals(probe.health()[0], {
      index: 0,
      vram_used_mb: 0,
      vram_free_mb: 24576,
      utilization_pct: 0,
      temp_c: 0,
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
