import { versionInfo } from "../common/version.ts";
import type { ServerDeps } from "./context.ts";
import type { HistogramSnapshot, SchedulerStats } from "../harness/mod.ts";
import { Exposition, METRICS_CONTENT_TYPE } from "./metrics.ts";

/** One histogram family with a series per model. */
function histogramFamily(
  out: Exposition,
  name: string,
  help: string,
  series: [string, string, HistogramSnapshot | undefined][],
): void {
  out.family(name, "histogram", help);
  for (const [model, harness, h] of series) {
    if (!h) continue;
    const labels = { model, harness };
    h.buckets.forEach((le, i) =>
      out.sample(`${name}_bucket`, { ...labels, le: String(le) }, h.counts[i])
    );
    out.sample(`${name}_bucket`, { ...labels, le: "+Inf" }, h.count);
    out.sample(`${name}_sum`, labels, h.sum);
    out.sample(`${name}_count`, labels, h.count);
  }
}

/** The whole /metrics document: HTTP series, models, GPUs, the process. */
export function renderMetrics(
  deps: ServerDeps,
): [string, 200, Record<string, string>] {
  const out = new Exposition();
  deps.metrics.render(out);

  const models = deps.registry.list();
  const byStatus = new Map<string, number>();
  for (const m of models) {
    const key = `${m.harness}\u0000${m.status}`;
    byStatus.set(key, (byStatus.get(key) ?? 0) + 1);
  }
  out.family("neuron_models", "gauge", "Models known to this node, by harness and status.");
  for (const [key, n] of byStatus) {
    const [harness, status] = key.split("\u0000");
    out.sample("neuron_models", { harness, status }, n);
  }

  const stats = deps.registry.health().flatMap((h) =>
    h.models.map((m) => ({ ...m, harness: h.name }))
  );
  out.family("neuron_model_in_flight", "gauge", "Requests being served, per model.");
  for (const m of stats) {
    out.sample("neuron_model_in_flight", { model: m.id, harness: m.harness }, m.in_flight);
  }
  out.family("neuron_model_queue_depth", "gauge", "Requests waiting for admission, per model.");
  for (const m of stats) {
    out.sample("neuron_model_queue_depth", { model: m.id, harness: m.harness }, m.queue_depth);
  }
  out.family("neuron_model_tokens_per_second", "gauge", "Recent throughput, per model and phase.");
  for (const m of stats) {
    out.sample("neuron_model_tokens_per_second", {
      model: m.id,
      harness: m.harness,
      phase: "prefill",
    }, m.tok_s_prefill);
    out.sample("neuron_model_tokens_per_second", {
      model: m.id,
      harness: m.harness,
      phase: "decode",
    }, m.tok_s_decode);
  }
  out.family("neuron_model_tokens_total", "counter", "Tokens processed, per model and kind.");
  for (const m of stats) {
    if (m.prompt_tokens_total !== undefined) {
      out.sample(
        "neuron_model_tokens_total",
        { model: m.id, harness: m.harness, kind: "prompt" },
        m.prompt_tokens_total,
      );
    }
    if (m.completion_tokens_total !== undefined) {
      out.sample("neuron_model_tokens_total", {
        model: m.id,
        harness: m.harness,
        kind: "completion",
      }, m.completion_tokens_total);
    }
  }

  out.family(
    "neuron_model_requests_total",
    "counter",
    "Inference requests, per model and outcome.",
  );
  for (const m of stats) {
    for (const [outcome, n] of Object.entries(m.requests_total ?? {})) {
      out.sample("neuron_model_requests_total", { model: m.id, harness: m.harness, outcome }, n);
    }
  }
  const batching = stats.flatMap((m) => (m.scheduler ? [{ ...m, s: m.scheduler }] : []));
  const gauges: Array<[string, string, (s: SchedulerStats) => number]> = [
    ["neuron_model_sequences_running", "Sequences in the running batch.", (s) => s.running],
    ["neuron_model_sequences_waiting", "Sequences waiting for admission.", (s) => s.waiting],
    ["neuron_model_kv_blocks_used", "KV cache blocks held by sequences.", (s) => s.kv_blocks_used],
    ["neuron_model_kv_blocks_free", "KV cache blocks free or evictable.", (s) => s.kv_blocks_free],
    [
      "neuron_model_kv_blocks_cached",
      "KV cache blocks holding a reusable prefix.",
      (s) => s.kv_blocks_cached,
    ],
    [
      "neuron_model_prefix_cache_hit_ratio",
      "Prefix-cache lookups that hit, 0..1.",
      (s) => s.prefix_hit_rate,
    ],
    [
      "neuron_model_preemptions",
      "Sequences preempted for lack of KV cache so far.",
      (s) => s.preemptions,
    ],
    ["neuron_model_batch_tokens_mean", "Mean tokens per engine step.", (s) => s.mean_batch_tokens],
    [
      "neuron_model_spec_acceptance_ratio",
      "Speculative decoding: drafted tokens accepted, 0..1.",
      (s) => s.spec_acceptance_rate,
    ],
    [
      "neuron_model_spec_tokens_per_verification",
      "Speculative decoding: tokens produced per verification.",
      (s) => s.spec_tokens_per_verification,
    ],
  ];
  for (const [name, help, value] of gauges) {
    out.family(name, "gauge", help);
    for (const m of batching) out.sample(name, { model: m.id, harness: m.harness }, value(m.s));
  }
  const counters: Array<[string, string, (s: SchedulerStats) => number]> = [
    [
      "neuron_model_spec_verifications_total",
      "Speculative decoding: drafts verified.",
      (s) => s.spec_verifications,
    ],
    [
      "neuron_model_spec_drafted_tokens_total",
      "Speculative decoding: tokens drafted.",
      (s) => s.spec_drafted_tokens,
    ],
    [
      "neuron_model_spec_accepted_tokens_total",
      "Speculative decoding: drafted tokens accepted.",
      (s) => s.spec_accepted_tokens,
    ],
  ];
  for (const [name, help, value] of counters) {
    out.family(name, "counter", help);
    for (const m of batching) out.sample(name, { model: m.id, harness: m.harness }, value(m.s));
  }

  histogramFamily(
    out,
    "neuron_model_time_to_first_token_seconds",
    "Time from a request's arrival to its first generated token.",
    stats.map((m) => [m.id, m.harness, m.time_to_first_token_seconds]),
  );
  histogramFamily(
    out,
    "neuron_model_inter_token_latency_seconds",
    "Time between consecutive generated tokens of a request.",
    stats.map((m) => [m.id, m.harness, m.inter_token_latency_seconds]),
  );

  const gpus = deps.probe.health();
  const MIB = 1024 * 1024;
  out.family("neuron_gpu_memory_used_bytes", "gauge", "GPU memory in use (NVML).");
  for (const g of gpus) {
    out.sample("neuron_gpu_memory_used_bytes", { device: String(g.index) }, g.vram_used_mb * MIB);
  }
  out.family("neuron_gpu_memory_free_bytes", "gauge", "GPU memory free (NVML).");
  for (const g of gpus) {
    out.sample("neuron_gpu_memory_free_bytes", { device: String(g.index) }, g.vram_free_mb * MIB);
  }
  out.family("neuron_gpu_utilization_ratio", "gauge", "GPU busy fraction (NVML).");
  for (const g of gpus) {
    out.sample(
      "neuron_gpu_utilization_ratio",
      { device: String(g.index) },
      g.utilization_pct / 100,
    );
  }
  out.family("neuron_gpu_temperature_celsius", "gauge", "GPU temperature (NVML).");
  for (const g of gpus) {
    out.sample("neuron_gpu_temperature_celsius", { device: String(g.index) }, g.temp_c);
  }

  const mem = Deno.memoryUsage();
  out.family("neuron_process_resident_memory_bytes", "gauge", "Resident set size.")
    .sample("neuron_process_resident_memory_bytes", {}, mem.rss);
  out.family("neuron_process_heap_used_bytes", "gauge", "JavaScript heap in use.")
    .sample("neuron_process_heap_used_bytes", {}, mem.heapUsed);
  out.family("neuron_process_heap_total_bytes", "gauge", "JavaScript heap reserved.")
    .sample("neuron_process_heap_total_bytes", {}, mem.heapTotal);
  out.family(
    "neuron_process_external_memory_bytes",
    "gauge",
    "Memory held outside the heap (buffers).",
  )
    .sample("neuron_process_external_memory_bytes", {}, mem.external);
  out.family("neuron_process_start_time_seconds", "gauge", "Start time, seconds since the epoch.")
    .sample("neuron_process_start_time_seconds", {}, deps.startedAt / 1000);
  const v = versionInfo();
  out.family("neuron_build_info", "gauge", "Always 1; the labels describe the build.")
    .sample("neuron_build_info", { version: v.package_version, git_sha: v.git_sha }, 1);

  return [out.text(), 200, { "content-type": METRICS_CONTENT_TYPE }];
}
