// A counter bumped whenever recordings change from one part of the page (the recovery banner keeps
// or discards one) so that another (the recordings page) reloads its list.

export const recordingsChanged = $state({ version: 0 });

export function bumpRecordings(): void {
  recordingsChanged.version++;
}
