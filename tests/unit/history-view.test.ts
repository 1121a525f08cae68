// @vitest-environment happy-dom
// The session history card: per participant the mouth-to-ear median / p95 (or the buffer wait
// plus the network delay when there is no estimate) and the verdict; old records show as before.
import { flushSync, mount, unmount } from 'svelte';
import { afterEach, describe, expect, it } from 'vitest';
import SessionHistory from '../../app/src/ui/components/SessionHistory.svelte';
import type { ParticipantSummary, SessionRecord, StageSummary } from '../../app/src/store/schema';

const base: ParticipantSummary = {
  underruns: 0,
  lossPct: 0,
  avgBufferMs: 20,
  maxBufferMs: 30,
  meanLatencyMs: 25,
};
const stage = (p50: number, p95: number): StageSummary => ({ p50, p95, p99: p95, max: p95, count: 100 });

function session(participants: Record<string, ParticipantSummary>): SessionRecord {
  return {
    id: 'a',
    room: 'band',
    startedAt: 1000,
    endedAt: 61_000,
    updatedAt: 61_000,
    participants: Object.keys(participants),
    summary: { participants, engineUnderruns: 0 },
  };
}

let mounted: ReturnType<typeof mount> | null = null;

function render(s: SessionRecord): HTMLElement {
  const target = document.createElement('div');
  document.body.append(target);
  mounted = mount(SessionHistory, { target, props: { sessions: [s] } });
  flushSync();
  return target;
}

afterEach(() => {
  if (mounted) unmount(mounted);
  mounted = null;
  document.body.innerHTML = '';
});

describe('session history card', () => {
  it('shows mouth to ear first, else buffer + network medians, and the verdict badge', () => {
    const el = render(
      session({
        Bea: {
          ...base,
          stages: { network: stage(6, 9), mouthToEar: stage(24.4, 31.6), jitterWait: stage(8, 12) },
          verdict: 'good',
        },
        Cy: { ...base, stages: { jitterWait: stage(8, 12), network: stage(6.5, 9) }, verdict: 'poor' },
        Dan: { ...base, stages: { jitterWait: stage(3.25, 4) }, verdict: null },
        Eve: base,
      }),
    );
    const rows = [...el.querySelectorAll('[data-testid="history-participant"]')];
    expect(rows.map((r) => r.textContent?.replace(/\s+/g, ' ').trim())).toEqual([
      'Bea 24 / 32 ms mouth to ear Good',
      'Cy 15 ms buffer + network Poor',
      'Dan 3.3 ms buffer',
    ]);
    expect(
      [...el.querySelectorAll('[data-testid="history-verdict"]')].map((b) => b.getAttribute('data-grade')),
    ).toEqual(['good', 'poor']);
    expect(el.querySelector('.who')?.textContent).toBe('with Bea, Cy, Dan, Eve');
  });

  it('shows an old record without figures as before', () => {
    const el = render(session({ Bea: base }));
    expect(el.querySelectorAll('[data-testid="history-entry"]')).toHaveLength(1);
    expect(el.querySelectorAll('[data-testid="history-participant"]')).toHaveLength(0);
  });
});
