// The service worker's header guarantee (sw/isolation.ts): every response it hands out keeps the
// page cross-origin isolated, with the server's exact values, and keeps the server's CSP.
import { describe, expect, it } from 'vitest';
import { needsIsolationHeaders, withIsolation } from '../../sw/isolation';
import { SECURITY_HEADERS } from '../../app/http-headers.mjs';

const ISOLATION = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
  'cross-origin-resource-policy': 'same-origin',
};

describe('withIsolation', () => {
  it('adds the isolation headers and the CSP to a bare response, keeping status and body', async () => {
    const r = withIsolation(
      new Response('<p>hi</p>', { status: 200, statusText: 'OK', headers: { 'content-type': 'text/html' } }),
    );
    for (const [name, value] of Object.entries(ISOLATION)) expect(r.headers.get(name)).toBe(value);
    expect(r.headers.get('content-security-policy')).toBe(SECURITY_HEADERS['Content-Security-Policy']);
    expect(r.headers.get('content-type')).toBe('text/html');
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('<p>hi</p>');
    expect(needsIsolationHeaders(r.headers)).toBe(false);
  });

  it('returns a response that already has them unchanged (same object)', () => {
    const r = new Response('x', { headers: SECURITY_HEADERS });
    expect(withIsolation(r)).toBe(r);
  });

  it('overrides a wrong isolation value but keeps the CSP the server sent', () => {
    const headers = {
      ...SECURITY_HEADERS,
      'Cross-Origin-Embedder-Policy': 'unsafe-none',
      'Content-Security-Policy': "default-src 'self'",
    };
    const r = withIsolation(new Response('x', { headers }));
    expect(r.headers.get('cross-origin-embedder-policy')).toBe('require-corp');
    expect(r.headers.get('content-security-policy')).toBe("default-src 'self'");
  });

  it('copies null-body statuses without a body', () => {
    const r = withIsolation(new Response(null, { status: 204 }));
    expect(r.status).toBe(204);
    expect(r.headers.get('cross-origin-opener-policy')).toBe('same-origin');
  });
});
