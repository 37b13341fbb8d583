/**
 * JSON arrays under `items`, `prefixItems`, `minItems` and `maxItems`: the prefix items in
 * order, then as many of `items` as the counts allow, each after a comma but the first.
 */

import { ConstraintError } from "./errors.ts";
import { MAX_COUNT } from "./json_strings.ts";
import type { SchemaRules } from "./json_rules.ts";

export function arrayRule(
  c: SchemaRules,
  schema: Record<string, unknown>,
  where: string,
  hint: string,
): string {
  const num = (k: string): number | undefined => {
    const v = schema[k];
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0) {
      throw new ConstraintError(
        "invalid_schema",
        `${where}/${k}: must be a non-negative integer`,
      );
    }
    if (v > MAX_COUNT) {
      throw new ConstraintError(
        "unsupported_schema",
        `${where}/${k}: ${v} is above ${MAX_COUNT}, the most that can be enforced`,
      );
    }
    return v;
  };
  const min = num("minItems") ?? 0;
  const max = num("maxItems");
  if (max !== undefined && max < min) {
    throw new ConstraintError("invalid_schema", `${where}: maxItems is below minItems`);
  }
  const sp = c.primitive("space");
  const prefix = schema.prefixItems;
  if (prefix !== undefined && (!Array.isArray(prefix) || prefix.length === 0)) {
    throw new ConstraintError(
      "invalid_schema",
      `${where}/prefixItems: must be a non-empty array`,
    );
  }
  const fixed = (prefix as unknown[] | undefined ?? []).map((s, i) =>
    c.visit(s, `${where}/prefixItems/${i}`, `${hint}-${i}`)
  );
  const extraMin = Math.max(0, min - fixed.length);
  const extraMax = max === undefined ? Infinity : max - fixed.length;
  const items = schema.items;
  const noExtra = items === false || (prefix !== undefined && items === undefined);
  if (extraMax < 0 || (noExtra && extraMin > 0)) {
    throw new ConstraintError(
      "invalid_schema",
      `${where}: minItems/maxItems cannot be met with these prefixItems and items`,
    );
  }
  const parts = fixed.map((f, i) => (i === 0 ? f : `"," ${sp} ${f}`));
  if (!noExtra && extraMax > 0) {
    const item = c.visit(items ?? true, `${where}/items`, `${hint}-item`);
    const sep = `"," ${sp} ${item}`;
    const rep = (lo: number, hi: number): string =>
      hi === Infinity
        ? `(${sep}){${lo},}`
        : hi === lo
        ? `(${sep}){${lo}}`
        : `(${sep}){${lo},${hi}}`;
    if (fixed.length > 0) {
      if (extraMax > 0) parts.push(rep(extraMin, extraMax));
    } else if (extraMin > 0) {
      parts.push(item, rep(extraMin - 1, extraMax - 1));
    } else {
      parts.push(`(${item} ${rep(0, extraMax - 1)})?`);
    }
  }
  return c.rule(hint, `"[" ${sp} ${parts.join(" ")} "]" ${sp}`);
}
