/**
 * Admission control for one model (`[harness.native.admission]`): at most `maxInFlight`
 * requests generate at once, at most `maxQueueDepth` wait behind them in arrival order,
 * none waits longer than `maxWaitSecs`. A full queue or a wait that runs out answers 503
 * with a Retry-After estimated from recent service times; a waiter whose client left is
 * dropped from the queue.
 */

import { NeuronError } from "../../common/errors.ts";

export interface AdmissionLimits {
  maxInFlight: number;
  maxQueueDepth: number;
  maxWaitSecs: number;
}

/** 503 + Retry-After: the model is busy (WIRE.md's `rate_limit_exceeded`). */
export class AdmissionError extends NeuronError {
  declare readonly code: "rate_limit_exceeded";
  readonly retryAfter: number;

  constructor(message: string, retryAfter: number) {
    super("rate_limit_exceeded", message);
    this.retryAfter = retryAfter;
  }
}

/** Releases an admission slot; calling it again does nothing. */
export type Release = () => void;

interface Waiter {
  resolve: (release: Release) => void;
  reject: (err: unknown) => void;
  cleanup: () => void;
}

const MIN_RETRY_SECS = 1;
const MAX_RETRY_SECS = 60;

export class Admission {
  readonly #limits: AdmissionLimits;
  readonly #queue: Waiter[] = [];
  #inFlight = 0;
  /** Smoothed seconds a request holds its slot, for Retry-After. */
  #serviceSecs = 1;

  constructor(limits: AdmissionLimits) {
    this.#limits = limits;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  get queueDepth(): number {
    return this.#queue.length;
  }

  /** Resolves with a release function once the request may run. */
  acquire(signal: AbortSignal): Promise<Release> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.#inFlight < this.#limits.maxInFlight && this.#queue.length === 0) {
      return Promise.resolve(this.#grant());
    }
    if (this.#queue.length >= this.#limits.maxQueueDepth) {
      return Promise.reject(
        new AdmissionError(
          `the model is busy: ${this.#inFlight} requests running and ${this.#queue.length} ` +
            "waiting (the queue is full); retry later",
          this.#retryAfter(),
        ),
      );
    }
    return new Promise<Release>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#drop(waiter);
        reject(
          new AdmissionError(
            `the model is busy: waited ${this.#limits.maxWaitSecs} s in the queue; retry later`,
            this.#retryAfter(),
          ),
        );
      }, this.#limits.maxWaitSecs * 1000);
      const onAbort = (): void => {
        this.#drop(waiter);
        reject(signal.reason);
      };
      const waiter: Waiter = {
        resolve,
        reject,
        cleanup: () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", onAbort);
        },
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.#queue.push(waiter);
    });
  }

  /** Fails every waiting request (the model is going away). */
  rejectWaiting(err: unknown): void {
    for (const w of this.#queue.splice(0)) {
      w.cleanup();
      w.reject(err);
    }
  }

  #grant(): Release {
    this.#inFlight++;
    const started = performance.now();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inFlight--;
      const secs = (performance.now() - started) / 1000;
      this.#serviceSecs = 0.8 * this.#serviceSecs + 0.2 * secs;
      const next = this.#queue.shift();
      if (next) {
        next.cleanup();
        next.resolve(this.#grant());
      }
    };
  }

  #drop(waiter: Waiter): void {
    waiter.cleanup();
    const i = this.#queue.indexOf(waiter);
    if (i >= 0) this.#queue.splice(i, 1);
  }

  /** Seconds until a slot is likely free: the queue ahead, served at the recent pace. */
  #retryAfter(): number {
    const ahead = this.#queue.length + 1;
    const secs = (this.#serviceSecs * ahead) / this.#limits.maxInFlight;
    return Math.min(MAX_RETRY_SECS, Math.max(MIN_RETRY_SECS, Math.ceil(secs)));
  }
}
