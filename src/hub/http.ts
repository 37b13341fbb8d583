/**
 * One request to the hub or to the storage it sends downloads to (an LFS CDN, the Xet
 * bridge): the token only to the hub's own origin, failure statuses as HubErrors that name
 * the host that answered and carry the hub's `X-Error-Message`, and 408/429/5xx or network
 * failures retried as retry.ts says while the fetch's budget lasts.
 */

import { errorMessage } from "../common/errors.ts";
import type { Logger } from "../common/log.ts";
import { HubError } from "./errors.ts";
import { repoName, type RepoRef, revisionOf } from "./model_ref.ts";
import { redactUrls, urlForLog } from "./redact.ts";
import { backoffMs, isRetryableStatus, type RetryBudget, serverWaitSecs, sleep } from "./retry.ts";
import type { HubSource } from "./sources.ts";

/** Retries of one request at most, however much budget is left (huggingface_hub's 5). */
const MAX_RETRIES = 5;
/** Bytes of an error body read for its message. */
const ERROR_BODY_BYTES = 4096;
const ERROR_MESSAGE_CHARS = 300;

/** Who asks, about what, and how patiently. */
export interface HubCall {
  source: HubSource;
  ref: RepoRef;
  /** What is being done, for messages: "listing", "resolving x.gguf", "downloading x.gguf". */
  what: string;
  log: Logger;
  signal?: AbortSignal;
  /** Null: one attempt (the cache may answer instead); else retries drawn from it. */
  budget: RetryBudget | null;
}

export function authHeaders(source: HubSource, url: string): Record<string, string> {
  if (!source.token) return {};
  // The token is the hub's; a CDN or another host never sees it.
  return isHub(source, url) ? { authorization: `Bearer ${source.token}` } : {};
}

function isHub(source: HubSource, url: string): boolean {
  return new URL(url).origin === new URL(source.endpoint).origin;
}

/** The hub's own words about a refusal: `X-Error-Message`, else the body's `error` or text. */
async function refusalText(res: Response): Promise<string> {
  const header = res.headers.get("x-error-message");
  let text = header ?? "";
  if (!header && res.body) {
    const reader = res.body.getReader();
    const chunks: Uint8Array[] = [];
    let n = 0;
    try {
      while (n < ERROR_BODY_BYTES) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(value);
        n += value.length;
      }
    } catch {
      // a body cut short says nothing more
    }
    const bytes = new Uint8Array(n);
    chunks.reduce((at, c) => (bytes.set(c, at), at + c.length), 0);
    const body = new TextDecoder().decode(bytes.subarray(0, ERROR_BODY_BYTES));
    try {
      const error = (JSON.parse(body) as { error?: unknown }).error;
      text = typeof error === "string" ? error : body;
    } catch {
      text = body.replace(/<[^>]*>/g, " ");
    }
  }
  await res.body?.cancel().catch(() => {});
  const clean = redactUrls(text.replace(/\s+/g, " ").trim());
  return clean.length > ERROR_MESSAGE_CHARS ? `${clean.slice(0, ERROR_MESSAGE_CHARS)}…` : clean;
}

/** The HubError a failure status stands for. */
async function statusError(call: HubCall, url: string, res: Response): Promise<HubError> {
  const host = new URL(url).host;
  const repo = repoName(call.ref);
  const status = res.status;
  const errorCode = res.headers.get("x-error-code");
  const said = await refusalText(res);
  const because = `${host} answered HTTP ${status}${said ? `: ${said}` : ""}`;
  const opts = { status };
  if (isHub(call.source, url)) {
    const tokenHint = call.source.scheme === "hf" ? "HF_TOKEN or $HF_HOME/token" : "auth_env";
    if (errorCode === "RevisionNotFound") {
      return new HubError(
        "revision_not_found",
        `${call.what}: ${repo} has no revision ${revisionOf(call.ref)} (${because})`,
        opts,
      );
    }
    if (status === 404 || errorCode === "RepoNotFound") {
      const hint = status === 401 ? `; a private repository needs a token (${tokenHint})` : "";
      return new HubError(
        "repo_not_found",
        `${call.what}: ${repo} was not found (${because})${hint}`,
        opts,
      );
    }
    if (status === 401 || status === 403) {
      return new HubError(
        "hub_unauthorized",
        `${call.what}: ${host} refused access to ${repo} (HTTP ${status})` +
          (said ? `: ${said}` : `; gated or private repositories need a token (${tokenHint})`),
        opts,
      );
    }
  } else if (status === 401 || status === 403 || status === 410) {
    return new HubError(
      "download_refused",
      `${call.what}: ${because} (the download URL the hub gave has expired or was refused)`,
      opts,
    );
  }
  if (status === 429) {
    const wait = serverWaitSecs(res.headers);
    return new HubError(
      "hub_rate_limited",
      `${call.what}: ${host} is rate limiting us (HTTP 429${
        wait === null ? "" : `, retry in ${wait} s`
      })${said ? `: ${said}` : ""}`,
      { status, ...(wait === null ? {} : { retryAfter: wait }) },
    );
  }
  if (isRetryableStatus(status)) {
    return new HubError("hub_unreachable", `${call.what}: ${because}`, opts);
  }
  return new HubError("hub_error", `${call.what}: ${because}`, opts);
}

interface Failed {
  err: HubError;
  /** Whether another attempt may succeed. */
  retryable: boolean;
  /** Seconds the server asked us to wait, if it said. */
  serverWait: number | null;
}

async function attempt(
  call: HubCall,
  url: string,
  init: RequestInit,
  signal: AbortSignal,
): Promise<Response | Failed> {
  let res: Response;
  try {
    res = await fetch(url, {
      ...init,
      headers: { ...authHeaders(call.source, url), ...(init.headers as Record<string, string>) },
      signal,
    });
  } catch (e) {
    if (call.signal?.aborted) throw call.signal.reason ?? e;
    const err = new HubError(
      "hub_unreachable",
      `${call.what}: cannot reach ${new URL(url).host}: ${redactUrls(errorMessage(e))}`,
      { cause: e },
    );
    return { err, retryable: true, serverWait: null };
  }
  if (res.ok || (res.status >= 300 && res.status < 400) || res.status === 416) return res;
  const err = await statusError(call, url, res);
  return {
    err,
    retryable: isRetryableStatus(res.status),
    serverWait: serverWaitSecs(res.headers),
  };
}

/**
 * fetch with the call's retries. Success, redirects and 416 come back as responses; other
 * statuses and network failures as HubErrors. `signal` makes each attempt's signal (a
 * timeout, a stall detector).
 */
export async function hubFetch(
  call: HubCall,
  url: string,
  init: RequestInit,
  signal: () => AbortSignal,
): Promise<Response> {
  for (let n = 1;; n++) {
    const outcome = await attempt(call, url, init, signal());
    if (outcome instanceof Response) return outcome;
    const { err, retryable, serverWait } = outcome;
    if (!retryable || !call.budget || n > MAX_RETRIES) throw err;
    const waitMs = serverWait !== null ? serverWait * 1000 : backoffMs(call.budget.policy, n);
    if (!call.budget.take(waitMs)) throw err;
    call.log.warn("hub request failed; retrying", {
      url: urlForLog(url),
      status: err.status ?? null,
      attempt: n,
      retry_in_ms: waitMs,
      error: err.message,
    });
    await sleep(waitMs, call.signal);
    if (call.signal?.aborted) throw call.signal.reason ?? err;
  }
}
