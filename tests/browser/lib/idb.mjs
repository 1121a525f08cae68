// The app's database seen through IndexedDB itself (not the app's code): read back in a page by
// the browser tests that check what the app stored, and made as version 1 was, both in a page and
// under fake-indexeddb by the unit tests of the upgrade. Each function is self-contained, so that
// `page.evaluate` can run it in the page.

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

/**
 * Creates database version 1 exactly as it was (two stores: settings by key, rooms by name) and
 * fills it: `settings` as [key, value] pairs.
 * @param {{ name: string, rooms: unknown[], settings: [string, unknown][] }} v1
 * @returns {Promise<void>}
 */
export function createV1({ name, rooms, settings }) {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(name, 1);
    req.onupgradeneeded = () => {
      req.result.createObjectStore('settings');
      req.result.createObjectStore('rooms', { keyPath: 'name' });
    };
    req.onerror = () => reject(req.error);
    req.onsuccess = () => {
      const conn = req.result;
      const tx = conn.transaction(['settings', 'rooms'], 'readwrite');
      for (const r of rooms) tx.objectStore('rooms').put(r);
      for (const [k, v] of settings) tx.objectStore('settings').put(v, k);
      tx.oncomplete = () => {
        conn.close();
        resolve();
      };
      tx.onerror = () => reject(tx.error);
    };
  });
}
