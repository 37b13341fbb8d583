/**
 * What the object and array rules (json_objects.ts, json_arrays.ts) need of the schema
 * converter that calls them (SchemaConverter, json_schema.ts): naming rules, the built-in
 * ones, and converting the schemas nested in theirs. An interface of its own, so that the
 * two do not import the converter that imports them.
 */
export interface SchemaRules {
  /** A named rule with `body`; one with the same body already made is reused. */
  rule(hint: string, body: string): string;
  /** A built-in rule (and the ones it uses). */
  primitive(name: string): string;
  /** The rule name or expression for values valid under `schema` at `where`. */
  visit(schema: unknown, where: string, hint: string): string;
  /** A string key that is none of `names`, with no escapes (so it cannot spell one of them). */
  otherKey(names: readonly string[]): string;
  /** `where` extended by `key`, as a JSON pointer names the place in error messages. */
  pointer(where: string, key: string | number): string;
}
