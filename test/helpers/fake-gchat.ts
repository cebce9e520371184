import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type FakePlatform, type RecordedCall, startFakePlatform } from './fake-platform.js';

/**
 * A local Google Chat REST API (`GOOGLE_CHAT_API_URL=<url>`) and the token endpoint of a
 * workload identity federation pool. The adapter authenticates with Google's own auth
 * library: with GOOGLE_CHAT_USE_ADC=true it reads the Application Default Credentials file,
 * and an `external_account` file names its token endpoint (`token_url`), which a service
 * account key cannot. So the whole outgoing path runs for real, token exchange included:
 * the library trades the file's subject token here for an access token, and every API call
 * must carry it.
 */
export const GCHAT_ACCESS_TOKEN = 'ya29.fake-gchat-access-token';

export interface FakeGChat extends FakePlatform {
  readonly apiUrl: string;
  /**
   * The Application Default Credentials environment Google's auth library reads: the ADC file
   * whose token exchange this fake answers, and the project (named, so the library does not
   * look it up through gcloud or the metadata server on its first call).
   */
  readonly adcEnv: { GOOGLE_APPLICATION_CREDENTIALS: string; GOOGLE_CLOUD_PROJECT: string };
  /** POST /v1/spaces/:space/messages calls. */
  posts(): RecordedCall[];
  /** PUT or PATCH /v1/spaces/:space/messages/:id calls (edits), oldest first. */
  edits(): RecordedCall[];
  /** Token exchanges (POST /sts/token). */
  tokenExchanges(): RecordedCall[];
  /** What a posted message (`spaces/…/messages/…`) shows now, its edits applied. */
  textNow(name: string): string | undefined;
}

const MESSAGES = /^\/v1\/(spaces\/[A-Za-z0-9_-]+)\/messages$/;
const MESSAGE = /^\/v1\/(spaces\/[A-Za-z0-9_-]+\/messages\/[A-Za-z0-9_.-]+)$/;

export async function startFakeGChat(): Promise<FakeGChat> {
  let seq = 0;
  /** Message name → its text now. */
  const texts = new Map<string, string>();
  const fake = await startFakePlatform((call) => {
    if (call.method === 'POST' && call.path === '/sts/token') {
      // RFC 8693 token exchange, as Google's STS answers it.
      if (
        call.body.grant_type !== 'urn:ietf:params:oauth:grant-type:token-exchange' ||
        !call.body.subject_token
      ) {
        return { status: 400, body: { error: 'invalid_request' } };
      }
      return {
        body: {
          access_token: GCHAT_ACCESS_TOKEN,
          issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
          token_type: 'Bearer',
          expires_in: 3600,
        },
      };
    }
    if (call.headers.authorization !== `Bearer ${GCHAT_ACCESS_TOKEN}`) {
      return {
        status: 401,
        body: {
          error: {
            code: 401,
            message: 'Request had invalid authentication credentials.',
            status: 'UNAUTHENTICATED',
          },
        },
      };
    }
    const create = MESSAGES.exec(call.path);
    if (call.method === 'POST' && create) {
      seq += 1;
      const name = `${create[1]}/messages/m${Date.now()}.${seq}`;
      const text = String(call.body.text ?? '');
      texts.set(name, text);
      const thread = call.body.thread as { name?: string } | undefined;
      return {
        body: {
          name,
          text,
          thread: { name: thread?.name ?? `${create[1]}/threads/t${seq}` },
          createTime: new Date().toISOString(),
        },
      };
    }
    const one = MESSAGE.exec(call.path);
    if ((call.method === 'PUT' || call.method === 'PATCH') && one) {
      const name = one[1]!;
      if (!texts.has(name))
        return {
          status: 404,
          body: { error: { code: 404, message: 'Message not found', status: 'NOT_FOUND' } },
        };
      texts.set(name, String(call.body.text ?? ''));
      return { body: { name, text: call.body.text, lastUpdateTime: new Date().toISOString() } };
    }
    if (call.method === 'DELETE' && one) {
      texts.delete(one[1]!);
      return { body: {} };
    }
    return { status: 404, body: { error: { code: 404, message: 'Not found', status: 'NOT_FOUND' } } };
  });

  const dir = mkdtempSync(join(tmpdir(), 'fake-gchat-'));
  const subjectToken = join(dir, 'subject-token');
  writeFileSync(subjectToken, 'a-workload-identity-subject-token');
  const credentialsFile = join(dir, 'adc.json');
  writeFileSync(
    credentialsFile,
    JSON.stringify({
      type: 'external_account',
      audience:
        '//iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/tests/providers/local',
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      token_url: `${fake.url}/sts/token`,
      credential_source: { file: subjectToken },
    }),
  );

  const closeServer = fake.close;
  return Object.assign(fake, {
    apiUrl: fake.url,
    adcEnv: { GOOGLE_APPLICATION_CREDENTIALS: credentialsFile, GOOGLE_CLOUD_PROJECT: 'chatlane-tests' },
    posts: () => fake.callsTo(MESSAGES).filter((c) => c.method === 'POST'),
    edits: () => fake.callsTo(MESSAGE).filter((c) => c.method === 'PUT' || c.method === 'PATCH'),
    tokenExchanges: () => fake.callsTo('/sts/token'),
    textNow: (name: string) => texts.get(name),
    close: async () => {
      await closeServer();
      rmSync(dir, { recursive: true, force: true });
    },
  });
}
