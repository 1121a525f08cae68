// Free loopback ports for the processes the tests start (servers, drivers).
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';

/**
 * A loopback TCP port free a moment ago.
 * @returns {Promise<number>}
 */
export function freeTcpPort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** A loopback UDP port free a moment ago. */
export function freeUdpPort() {
  return new Promise((resolve, reject) => {
    const s = createSocket('udp4');
    s.once('error', reject);
    s.bind(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}
