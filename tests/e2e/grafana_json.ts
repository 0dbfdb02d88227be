// A Grafana dashboard as stored in JSON: string enums appear as their values ("value", not
// MappingType.ValueToText); every other field keeps the published @grafana/schema type, so tsc
// --strict still rejects unknown keys, misspelled keys and wrong value types.
export type Json<T> = T extends string
  ? `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends readonly (infer U)[]
      ? Json<U>[]
      : T extends object
        ? { [K in keyof T]: Json<T[K]> }
        : T;
