// An RFC 4180 CSV reader for tests: the stats export's CSV parsed back into rows of fields, both by
// the unit tests of the export and by the browser test that downloads it. Written apart from the
// app's writer so that a test checks the writer against an independent reader.

/**
 * Splits RFC 4180 CSV text (CRLF line ends, quoted fields with doubled quotes) into rows of fields.
 * @param {string} text
 * @returns {string[][]}
 */
export function parseCsv(text) {
  /** @type {string[][]} */
  const rows = [];
  /** @type {string[]} */
  let row = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      i++;
    } else field += c;
  }
  return rows;
}
