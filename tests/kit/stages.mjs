// What the browser tests and the latency benchmark keep of a latency stage's histogram (the
// StageHistogram of app/src/audio/latency.ts): its summary figures, without the bins. The list
// is passed into page.evaluate(), where each stage is cut down to these fields.

/** A stage's summary fields, in the order the reports list them. */
export const STAGE_SUMMARY_FIELDS = /** @type {const} */ ([
  'p50',
  'p95',
  'p99',
  'min',
  'max',
  'mean',
  'count',
  'rejected',
]);
