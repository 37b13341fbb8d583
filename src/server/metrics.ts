/**
 * A small Prometheus registry: exactly the series neuron exports, rendered in the text
 * exposition format (version 0.0.4). HTTP series are counted here as requests pass;
 * per-model, per-device and process numbers are read when /metrics is scraped.
 */

const BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

type Labels = Record<string, string>;

function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

function num(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

interface Histogram {
  labels: Labels;
  counts: number[];
  sum: number;
  count: number;
}

/** Builds one exposition document, family by family. */
export class Exposition {
  #lines: string[] = [];

  family(name: string, type: "counter" | "gauge" | "histogram", help: string): this {
    this.#lines.push(`# HELP ${name} ${help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`);
    this.#lines.push(`# TYPE ${name} ${type}`);
    return this;
  }

  sample(name: string, labels: Labels, value: number): this {
    this.#lines.push(`${name}${labelText(labels)} ${num(value)}`);
    return this;
  }

  text(): string {
    return this.#lines.join("\n") + "\n";
  }
}

export class HttpMetrics {
  readonly #requests = new Map<string, { labels: Labels; value: number }>();
  readonly #durations = new Map<string, Histogram>();
  #inFlight = 0;
  #connections: (() => { open: number; max: number }) | null = null;

  /** Where the open connections and their cap are read from (the listener, once bound). */
  countConnections(source: () => { open: number; max: number }): void {
    this.#connections = source;
  }

  begin(): void {
    this.#inFlight++;
  }

  end(): void {
    this.#inFlight--;
  }

  /** One answered request; `seconds` is the time to response headers. */
  observe(route: string, method: string, status: number, seconds: number): void {
    const labels = { route, method, status: String(status) };
    const key = JSON.stringify(labels);
    const counter = this.#requests.get(key) ?? { labels, value: 0 };
    counter.value++;
    this.#requests.set(key, counter);

    const hkey = JSON.stringify({ route, method });
    const h = this.#durations.get(hkey) ??
      { labels: { route, method }, counts: BUCKETS.map(() => 0), sum: 0, count: 0 };
    BUCKETS.forEach((b, i) => {
      if (seconds <= b) h.counts[i]++;
    });
    h.sum += seconds;
    h.count++;
    this.#durations.set(hkey, h);
  }

  render(out: Exposition): void {
    out.family("neuron_http_requests_total", "counter", "HTTP requests answered.");
    for (const c of this.#requests.values()) {
      out.sample("neuron_http_requests_total", c.labels, c.value);
    }

    const name = "neuron_http_request_duration_seconds";
    out.family(name, "histogram", "Time from request to response headers.");
    for (const h of this.#durations.values()) {
      BUCKETS.forEach((b, i) =>
        out.sample(`${name}_bucket`, { ...h.labels, le: num(b) }, h.counts[i])
      );
      out.sample(`${name}_bucket`, { ...h.labels, le: "+Inf" }, h.count);
      out.sample(`${name}_sum`, h.labels, h.sum);
      out.sample(`${name}_count`, h.labels, h.count);
    }

    out.family("neuron_http_requests_in_flight", "gauge", "HTTP requests not yet finished.");
    out.sample("neuron_http_requests_in_flight", {}, this.#inFlight);

    if (this.#connections) {
      const { open, max } = this.#connections();
      out.family("neuron_http_connections", "gauge", "Open client connections.")
        .sample("neuron_http_connections", {}, open);
      out.family("neuron_http_connections_max", "gauge", "The cap on open client connections.")
        .sample("neuron_http_connections_max", {}, max);
    }
  }
}
