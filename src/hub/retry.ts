/**
 * Waiting out a busy hub: 408, 429 and 5xx answers are retried, after the wait the server
 * asks for (on 429 the `RateLimit` header's `t=` when no requests remain, else
 * `Retry-After`, in seconds or as a date) or else an exponential backoff, as huggingface_hub
 * does. All the waits of one model fetch draw on one budget, so a fetch gives up in bounded
 * time; a wait longer than what is left is not started.
 */

export interface RetryPolicy {
  /** Total time one model fetch may spend waiting to retry; 0 never retries. */
  budgetMs: number;
  /** The first backoff without a server's hint; doubled each time up to `maxDelayMs`. */
  firstDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  budgetMs: 300_000,
  firstDelayMs: 1_000,
  maxDelayMs: 8_000,
};

/** Statuses that say "not now" rather than "no". */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/** `"api";r=0;t=55` (IETF draft ratelimit-headers, as the hub sends it). */
const RATE_LIMIT = /"\w+"\s*;\s*r\s*=\s*(\d+)\s*;\s*t\s*=\s*(\d+)/;

/** Seconds the server asks us to wait before the next request, if it says. */
export function serverWaitSecs(headers: Headers, now: number = Date.now()): number | null {
  const limit = RATE_LIMIT.exec(headers.get("ratelimit") ?? "");
  if (limit && Number(limit[1]) === 0) return Number(limit[2]);
  const after = (headers.get("retry-after") ?? "").trim();
  if (/^\d+$/.test(after)) return Number(after);
  const date = after ? Date.parse(after) : NaN;
  if (Number.isFinite(date)) return Math.max(0, Math.ceil((date - now) / 1000));
  return null;
}

/** The waiting time left to one model fetch. */
export class RetryBudget {
  readonly policy: RetryPolicy;
  #leftMs: number;

  constructor(policy: RetryPolicy) {
    this.policy = policy;
    this.#leftMs = policy.budgetMs;
  }

  get leftMs(): number {
    return this.#leftMs;
  }

  /** Takes `ms` from the budget; false (and nothing taken) when that is more than is left. */
  take(ms: number): boolean {
    if (ms > this.#leftMs) return false;
    this.#leftMs -= ms;
    return true;
  }
}

/** The backoff before retry number `attempt` (1-based) of one request. */
export function backoffMs(policy: RetryPolicy, attempt: number): number {
  return Math.min(policy.maxDelayMs, policy.firstDelayMs * 2 ** (attempt - 1));
}

/** Resolves after `ms`, or at once when `signal` fires. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
