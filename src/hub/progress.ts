/**
 * Download progress: bytes, rate (smoothed) and ETA, handed to a callback (the harness
 * shows it in /models), logged every few seconds, and drawn as a bar when stderr is a
 * terminal.
 */

import type { Logger } from "../common/log.ts";

export interface DownloadProgress {
  file: string;
  bytes: number;
  total: number;
  bytesPerSec: number;
  /** null until a rate is known. */
  etaSecs: number | null;
}

const SAMPLE_MS = 250;
const LOG_EVERY_MS = 5000;
const BAR_WIDTH = 30;
const encoder = new TextEncoder();

function stderrIsTerminal(): boolean {
  try {
    return Deno.stderr.isTerminal();
  } catch {
    return false;
  }
}

export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

function formatEta(secs: number | null): string {
  if (secs === null || !Number.isFinite(secs)) return "--:--";
  const s = Math.round(secs);
  const m = Math.floor(s / 60);
  return `${m}:${String(s % 60).padStart(2, "0")}`;
}

export class ProgressMeter {
  readonly #file: string;
  readonly #total: number;
  readonly #onProgress?: (p: DownloadProgress) => void;
  readonly #log: Logger;
  readonly #bar: boolean;
  #bytes = 0;
  #rate = 0;
  #lastSampleAt = 0;
  #lastSampleBytes = 0;
  #lastLogAt = 0;

  constructor(
    file: string,
    total: number,
    log: Logger,
    onProgress?: (p: DownloadProgress) => void,
  ) {
    this.#file = file;
    this.#total = total;
    this.#log = log;
    this.#onProgress = onProgress;
    this.#bar = stderrIsTerminal();
  }

  /** Bytes already on disk when (re)starting; they do not count towards the rate. */
  start(bytes: number): void {
    this.#bytes = bytes;
    this.#lastSampleAt = performance.now();
    this.#lastSampleBytes = bytes;
    this.#lastLogAt = this.#lastSampleAt;
    this.#report(true);
  }

  advance(n: number): void {
    this.#bytes += n;
    const now = performance.now();
    const dt = now - this.#lastSampleAt;
    if (dt < SAMPLE_MS) return;
    const instant = ((this.#bytes - this.#lastSampleBytes) * 1000) / dt;
    this.#rate = this.#rate === 0 ? instant : 0.7 * this.#rate + 0.3 * instant;
    this.#lastSampleAt = now;
    this.#lastSampleBytes = this.#bytes;
    this.#report(false);
    if (!this.#bar && now - this.#lastLogAt >= LOG_EVERY_MS) {
      this.#lastLogAt = now;
      const p = this.snapshot();
      this.#log.info("downloading", {
        file: p.file,
        bytes: p.bytes,
        total: p.total,
        percent: this.#total ? Math.floor((p.bytes / p.total) * 100) : null,
        bytes_per_sec: Math.round(p.bytesPerSec),
        eta_secs: p.etaSecs === null ? null : Math.round(p.etaSecs),
      });
    }
  }

  finish(): void {
    this.#report(true);
    if (this.#bar) this.#draw("\n");
  }

  snapshot(): DownloadProgress {
    const left = Math.max(0, this.#total - this.#bytes);
    return {
      file: this.#file,
      bytes: this.#bytes,
      total: this.#total,
      bytesPerSec: this.#rate,
      etaSecs: this.#rate > 0 ? left / this.#rate : null,
    };
  }

  #report(force: boolean): void {
    const p = this.snapshot();
    this.#onProgress?.(p);
    if (this.#bar && (force || p.bytes <= p.total)) this.#draw("");
  }

  #draw(end: string): void {
    const p = this.snapshot();
    const frac = p.total ? Math.min(1, p.bytes / p.total) : 0;
    const filled = Math.round(frac * BAR_WIDTH);
    const line = `\r${p.file} [${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}] ` +
      `${(frac * 100).toFixed(0).padStart(3)}% ${formatBytes(p.bytes)}/${formatBytes(p.total)} ` +
      `${formatBytes(p.bytesPerSec)}/s ETA ${formatEta(p.etaSecs)}\x1b[K${end}`;
    try {
      Deno.stderr.writeSync(encoder.encode(line));
    } catch {
      // a closed terminal must not fail the download
    }
  }
}
