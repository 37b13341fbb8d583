/**
 * Structured logging: one JSON object per line on stderr when stderr is not a terminal
 * (journald, files, CI), a short readable line when it is. Quiet by default: `info` is
 * for lifecycle events a operator wants to see (listening, model loaded, shutdown).
 */

export type LogLevel = "error" | "warn" | "info" | "debug" | "trace";
export type LogFields = Record<string, unknown>;

const LEVELS: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3, trace: 4 };

export function isLogLevel(value: string): value is LogLevel {
  return Object.hasOwn(LEVELS, value);
}

interface LogSink {
  threshold: number;
  json: boolean;
  write(line: string): void;
}

const encoder = new TextEncoder();

function defaultSink(): LogSink {
  let json = true;
  try {
    json = !Deno.stderr.isTerminal();
  } catch {
    // Workers without stderr access fall back to JSON lines.
  }
  return {
    threshold: LEVELS.info,
    json,
    write(line: string): void {
      try {
        Deno.stderr.writeSync(encoder.encode(line + "\n"));
      } catch {
        // A closed stderr must never take the process down.
      }
    },
  };
}

const sink: LogSink = defaultSink();

/** Sets the global threshold (`--log-level`, `NEURON_LOG_LEVEL`). */
export function setLogLevel(level: LogLevel): void {
  sink.threshold = LEVELS[level];
}

/** Forces JSON or readable output (tests; workers inherit the parent's choice). */
export function setLogFormat(format: "json" | "text"): void {
  sink.json = format === "json";
}

/** Replaces where lines go; returns a function that restores the previous writer. */
export function captureLogs(write: (line: string) => void): () => void {
  const previous = sink.write;
  sink.write = write;
  return () => {
    sink.write = previous;
  };
}

function render(value: unknown): string {
  if (typeof value === "string") return /[\s="]/.test(value) ? JSON.stringify(value) : value;
  if (value instanceof Error) return JSON.stringify(value.message);
  return JSON.stringify(value) ?? String(value);
}

function serialise(fields: LogFields): LogFields {
  const out: LogFields = {};
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    out[key] = value instanceof Error ? value.message : value;
  }
  return out;
}

export class Logger {
  readonly #fields: LogFields;

  constructor(fields: LogFields = {}) {
    this.#fields = fields;
  }

  /** A logger that adds `fields` to every line (e.g. `{ model: id }`). */
  child(fields: LogFields): Logger {
    return new Logger({ ...this.#fields, ...fields });
  }

  enabled(level: LogLevel): boolean {
    return LEVELS[level] <= sink.threshold;
  }

  error(msg: string, fields?: LogFields): void {
    this.#log("error", msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.#log("warn", msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.#log("info", msg, fields);
  }
  debug(msg: string, fields?: LogFields): void {
    this.#log("debug", msg, fields);
  }
  trace(msg: string, fields?: LogFields): void {
    this.#log("trace", msg, fields);
  }

  #log(level: LogLevel, msg: string, fields?: LogFields): void {
    if (LEVELS[level] > sink.threshold) return;
    const all = serialise({ ...this.#fields, ...fields });
    const ts = new Date().toISOString();
    if (sink.json) {
      sink.write(JSON.stringify({ ts, level, msg, ...all }));
      return;
    }
    const extras = Object.entries(all).map(([k, v]) => `${k}=${render(v)}`).join(" ");
    sink.write(
      `${ts.slice(11, 19)} ${level.toUpperCase().padEnd(5)} ${msg}${extras ? " " + extras : ""}`,
    );
  }
}

/** The process-wide root logger. */
export const log: Logger = new Logger();
