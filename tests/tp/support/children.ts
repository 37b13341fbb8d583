/**
 * Child processes of this test process, read from /proc. Test files run in parallel inside
 * one process, so each file tells its workers apart by the `--cuda-device` label it gives
 * them (a label only, on the CPU): it checks that every worker it started is gone after an
 * unload, and finds the one to kill, without touching another file's.
 */

export interface ChildProcessInfo {
  pid: number;
  argv: string[];
}

function stat(pid: string): { parent: number; state: string } | null {
  try {
    const text = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // The command name is in parentheses and may contain spaces: fields start after ")".
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0], parent: Number(fields[1]) };
  } catch {
    return null;
  }
}

/** Every live (not zombie) child of this process whose argv satisfies `match`. */
export function childProcesses(match: (argv: string[]) => boolean): ChildProcessInfo[] {
  const out: ChildProcessInfo[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    const s = stat(e.name);
    if (s === null || s.parent !== Deno.pid || s.state === "Z") continue;
    try {
      const argv = Deno.readTextFileSync(`/proc/${e.name}/cmdline`).split("\0").slice(0, -1);
      if (match(argv)) out.push({ pid: Number(e.name), argv });
    } catch {
      // Gone while we looked.
    }
  }
  return out;
}

/** The `neuron --worker` children labelled with CUDA device `device`. */
export function workersOn(device: number): ChildProcessInfo[] {
  return childProcesses((argv) =>
    argv.includes("--worker") && argv.at(-2) === "--cuda-device" && argv.at(-1) === String(device)
  );
}

/** Children running `script`. */
export function running(script: string): ChildProcessInfo[] {
  return childProcesses((argv) => argv.includes(script));
}

/** Waits until `check` holds (polling), failing after `ms`. */
export async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
