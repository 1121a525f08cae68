// The page origin's "tutti" database read with the browser's own IndexedDB API (not the app's),
// for the browser tests that check what the app stored.

/**
 * Every store of the "tutti" database but the audio chunks: each store's values under its name
 * and its keys under `<name>Keys`, with the database's version and store names.
 * @param {import('playwright-core').Page} page
 * @returns {Promise<Record<string, any>>}
 */
export function readDatabase(page) {
  return page.evaluate(
    () =>
      new Promise((resolve, reject) => {
        const req = indexedDB.open('tutti');
        req.onerror = () => reject(req.error);
        req.onsuccess = () => {
          const db = req.result;
          const names = [...db.objectStoreNames];
          /** @type {Record<string, any>} */
          const out = { version: db.version, stores: names };
          const tx = db.transaction(names.filter((n) => n !== 'chunks'));
          for (const n of names.filter((n) => n !== 'chunks')) {
            const r = tx.objectStore(n).getAll();
            const k = tx.objectStore(n).getAllKeys();
            r.onsuccess = () => (out[n] = r.result);
            k.onsuccess = () => (out[`${n}Keys`] = k.result);
          }
          tx.oncomplete = () => {
            db.close();
            resolve(out);
          };
          tx.onerror = () => reject(tx.error);
        };
      }),
  );
}
