// A gRPC client that none of hpod's code wrote and that knows nothing of its proto files:
// grpc-js with a server-reflection client from the npm registry. It lists the services through
// reflection, builds a stub from the descriptors the server sends, calls one read RPC
// (ListSweeps, with the user token), and checks that the health service answers SERVING. It
// reaches hpod over TLS, trusting the CA hpod keeps in its data directory (HPO_TLS_CA).
'use strict';
const assert = require('assert');
const fs = require('fs');
const grpc = require('@grpc/grpc-js');
const { GrpcReflection } = require('grpc-js-reflection-client');

const endpoint = process.env.HPO_ENDPOINT;
const token = process.env.HPO_TOKEN;
const creds = grpc.credentials.createSsl(fs.readFileSync(process.env.HPO_TLS_CA));

function unary(client, method, request, metadata) {
  return new Promise((resolve, reject) => {
    client[method](request, metadata || new grpc.Metadata(), (err, resp) => (err ? reject(err) : resolve(resp)));
  });
}

(async () => {
  const reflection = new GrpcReflection(endpoint, creds);
  const services = await reflection.listServices();
  console.log('services:', services.join(', '));
  for (const s of ['hpo.v1.HpoService', 'hpo.v1.ReportService', 'grpc.health.v1.Health']) {
    assert(services.includes(s), `${s} is not listed`);
  }

  const descriptor = await reflection.getDescriptorBySymbol('hpo.v1.HpoService');
  const pkg = descriptor.getPackageObject({ keepCase: true, longs: String, enums: String, defaults: true });
  const HpoService = pkg.hpo.v1.HpoService;
  const client = new HpoService(endpoint, creds);
  const md = new grpc.Metadata();
  md.add('authorization', `Bearer ${token}`);
  const resp = await unary(client, 'ListSweeps', {}, md);
  assert(resp.sweeps.length >= 1, 'ListSweeps returned no sweep');
  console.log('ListSweeps:', resp.sweeps.map((s) => `${s.id} ${s.name} ${s.state}`).join('; '));
  await assert.rejects(unary(client, 'ListSweeps', {}), (e) => e.code === grpc.status.UNAUTHENTICATED);

  // Health: raw bytes. HealthCheckRequest{} is empty; {status: SERVING} is 08 01.
  const raw = (b) => b;
  const Health = grpc.makeGenericClientConstructor({
    Check: { path: '/grpc.health.v1.Health/Check', requestStream: false, responseStream: false,
             requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw },
  }, 'Health');
  const healthClient = new Health(endpoint, creds);
  const health = await unary(healthClient, 'Check', Buffer.alloc(0));
  assert.deepStrictEqual([...health], [0x08, 0x01], `health answered ${[...health]}`);
  // Each service by its name, as the protocol asks: HealthCheckRequest{service: NAME} is 0a LEN NAME.
  for (const name of ['hpo.v1.HpoService', 'hpo.v1.ReportService']) {
    const request = Buffer.concat([Buffer.from([0x0a, name.length]), Buffer.from(name)]);
    const answer = await unary(healthClient, 'Check', request);
    assert.deepStrictEqual([...answer], [0x08, 0x01], `health of ${name} answered ${[...answer]}`);
  }
  await assert.rejects(
    unary(healthClient, 'Check', Buffer.concat([Buffer.from([0x0a, 7]), Buffer.from('no.such')])),
    (e) => e.code === grpc.status.NOT_FOUND);
  console.log('health: SERVING, also for hpo.v1.HpoService and hpo.v1.ReportService by name');
  process.exit(0);
})().catch((e) => {
  console.error('FAIL:', e);
  process.exit(1);
});
