/**
 * Log lines written while a test runs, kept instead of printed, so a test stays quiet and
 * can check what the leader reported (failures are logged with their reason).
 */
import { captureLogs, setLogFormat } from "../../../src/common/log.ts";

/** Runs `fn` with every log line collected into the array it is given. */
export function withLogs<T>(fn: (lines: string[]) => T): T {
  const lines: string[] = [];
  setLogFormat("json");
  const restore = captureLogs((line) => lines.push(line));
  let async = false;
  try {
    const out = fn(lines);
    if (out instanceof Promise) {
      async = true;
      return out.finally(restore) as T;
    }
    return out;
  } finally {
    if (!async) restore();
  }
}

/** The parsed lines whose `msg` is `msg`. */
export function logged(lines: string[], msg: string): Array<Record<string, unknown>> {
  return lines.map((l) => JSON.parse(l)).filter((r) => r.msg === msg);
}
