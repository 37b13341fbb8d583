import { errorMessage } from "../common/errors.ts";
import { HarnessError } from "./errors.ts";

const TIMEOUT_MS = 90_000;

/**
 * Starts and stops an external harness's systemd unit. The command is configurable
 * (`[systemd] systemctl`, e.g. "systemctl --user"), which is also how tests substitute a
 * stand-in script.
 */
export class SystemdUnit {
  readonly unit: string;
  readonly #command: string[];

  constructor(command: string, unit: string) {
    this.#command = command.trim().split(/\s+/);
    this.unit = unit;
  }

  start(): Promise<void> {
    return this.#run("start");
  }

  stop(): Promise<void> {
    return this.#run("stop");
  }

  async #run(verb: "start" | "stop"): Promise<void> {
    const [cmd, ...pre] = this.#command;
    const what = `${this.#command.join(" ")} ${verb} ${this.unit}`;
    let out: Deno.CommandOutput;
    try {
      out = await new Deno.Command(cmd, {
        args: [...pre, verb, this.unit],
        stdin: "null",
        stdout: "null",
        stderr: "piped",
        signal: AbortSignal.timeout(TIMEOUT_MS),
      }).output();
    } catch (err) {
      throw new HarnessError("harness_unavailable", `${what}: ${errorMessage(err)}`, {
        cause: err,
        retryAfter: 10,
      });
    }
    if (!out.success) {
      const stderr = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-3).join(" | ");
      throw new HarnessError(
        "harness_unavailable",
        `${what} exited with ${out.code}${stderr ? `: ${stderr}` : ""}`,
        { retryAfter: 10 },
      );
    }
  }
}
