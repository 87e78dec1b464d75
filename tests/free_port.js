// Test helper of the Node.js tests (tests/clients/node, tests/ui): a TCP
// port free on loopback now (the OS picks it; a server started right after
// takes it).
'use strict';

const net = require('node:net');

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

module.exports = {freePort};
