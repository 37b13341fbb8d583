import { assertEquals } from "../support/assert.ts";
import { csvFields, cutSteps, parseNcuCsv } from "./profile_table.ts";

// The shape of `ncu --csv --page raw`: a header row, a units row (empty ID), one row per
// kernel; numbers may carry thousands separators and units differ per column.
const CSV = [
  "==PROF== Connected to process 123",
  '"ID","Process ID","Kernel Name","Grid Size","dram__bytes_read.sum","gpu__time_duration.sum"',
  '"","","","","Mbyte","us"',
  '"0","123","mmvq_q8_0_1","(256, 1, 1)","1.50","2.25"',
  '"1","123","argmax_final","(1, 1, 1)","0.60","1,000.5"',
  '"2","123","void cutlass::Kernel<a, ""b"">","(8, 1, 1)","2","3"',
  '"","","","","byte","ns"',
  '"3","123","argmax_final","(1, 1, 1)","0","1,500"',
].join("\n");

Deno.test("profile table: ncu's quoted fields, doubled quotes and separators", () => {
  assertEquals(csvFields('"a","b ""c""","1,5"'), ["a", 'b "c"', "1,5"]);
  const rows = parseNcuCsv(CSV);
  assertEquals(rows.map((r) => r.name), [
    "mmvq_q8_0_1",
    "argmax_final",
    'void cutlass::Kernel<a, "b">',
    "argmax_final",
  ]);
  assertEquals(rows[0], { name: "mmvq_q8_0_1", micros: 2.25, bytesRead: 1.5e6 });
  assertEquals(rows[1].micros, 1000.5);
  assertEquals(rows[3], { name: "argmax_final", micros: 1.5, bytesRead: 0 });
});

Deno.test("profile table: kernels cut into steps after each argmax, named in order", () => {
  const steps = cutSteps(parseNcuCsv(CSV), [["m", "decode 1"], ["m", "decode 16"]]);
  assertEquals(steps.map((s) => [s.step, s.kernels.length]), [["decode 1", 2], ["decode 16", 2]]);
});

Deno.test("profile table: with ncu cut short (no CSV, no step list), the wall times still print", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.writeTextFileSync(
      `${dir}/times.jsonl`,
      '{"model":"m","step":"decode 1","ms":4.0731}\n{"model":"m","step":"prefill 512","ms":145.6}\n',
    );
    Deno.writeTextFileSync(`${dir}/ncu.csv`, "==PROF== Disconnected\n");
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./profile_table.ts", import.meta.url).pathname, ...[
        `${dir}/times.jsonl`,
        `${dir}/missing_steps.jsonl`,
        `${dir}/ncu.csv`,
      ]],
      env: { NO_COLOR: "1" },
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    assertEquals(out.success, true);
    assertEquals(text.split("\n").filter((l) => l.startsWith("| m |")), [
      "| m | decode 1 | 4.073 |",
      "| m | prefill 512 | 145.600 |",
    ]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
