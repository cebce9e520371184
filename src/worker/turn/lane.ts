import { TurnAbortedError } from '../../shared/errors.js';
import { renewAfter, renewalInterval } from '../../shared/liveness.js';
import type { Logger } from '../../shared/logger.js';
import type { WriteMark } from '../../shared/replica-acks.js';
import type {
  ChatStore,
  LeaseRenewal,
  TurnInput,
  TurnReads,
  UncommittedSend,
} from '../../shared/store/chat-store.js';
import type { CallUsage } from '../../shared/usage.js';
import { TurnAbort } from '../agent/turn-abort.js';

/** What a renewal check that sends nothing answers. */
const NOTHING_SENT: Promise<void> = Promise.resolve();

/**
 * A held turn lease on one chat. The lease only keeps other workers politely away; what
 * actually protects the chat is the fence every write script checks. When a renewal finds
 * the fence gone, `signal` aborts so the turn stops calling the model. The lane is the turn's
 * one AbortController (TurnAbort): its signal also aborts when a model step runs past
 * LLM_TIMEOUT_MS, which leaves the lane neither lost nor stopped.
 */
export class Lane extends TurnAbort {
  private timer: NodeJS.Timeout | undefined;
  private renewing = false;
  /** The turn is committing or done: no renewal may follow its commit, which may release the lease. */
  private ending = false;
  /**
   * Set once the lease is released: what release() answers without a call to Redis (the
   * commit's own release, then `ok: false` for any later call).
   */
  private releasedWith: { ok: boolean; pending: number } | undefined;
  /**
   * When the lease was last set, by this process's clock: the moment the acquire or the last
   * successful renewal was *sent* (Redis set leaseUntil = its now + leaseMs a little later),
   * so the lease runs at least leaseMs from here.
   */
  private leaseSetAt: number;
  /** What acquire read for the turn, until the turn takes it (`takeInput`). */
  private input: TurnInput | undefined;
  /** Stopped by our own shutdown rather than by another turn taking the chat. */
  private stoppedHere = false;
  /** Ended by a write of its own that failed (`failWrite`), not by another turn. */
  private failedHere = false;

  private constructor(
    /**
     * REDIS_REPLICA_ACKS: the connection the lease was taken and confirmed on. The turn's
     * later writes are confirmed, if at all, by the commit's WAIT on the connection it runs
     * on, which covers only what that connection wrote.
     */
    readonly acquiredOn: WriteMark | undefined,
    /** The store its lease lives in (RunningTurns renews the leases of one store together). */
    readonly store: ChatStore,
    readonly chatKey: string,
    readonly owner: string,
    readonly fence: string,
    readonly runId: string,
    readonly leaseMs: number,
    private readonly logger: Logger,
    /** What earlier runs of this chat sent and never committed (read by the acquire script). */
    readonly uncommitted: UncommittedSend[],
    /** The chat's reply route as stored when the lease was taken (meta.route), if any. */
    readonly route: string | undefined,
    /** The run whose reply stream was still open when the lease was taken (it died mid-reply). */
    readonly openReply: string | undefined,
    /** Someone could watch the chat's replies when the lease was taken (its watch key existed). */
    readonly watched: boolean,
    input: TurnInput,
    leaseSetAt: number,
  ) {
    super();
    this.input = input;
    this.leaseSetAt = leaseSetAt;
  }

  /**
   * Returns the lane, or the ms until the current holder's lease runs out. The lane renews
   * its lease on its own timer unless `renewedElsewhere` (RunningTurns renews all of a
   * process's lanes on one timer, see there). `reads`: what the acquire reads for the turn
   * in the same round trip (`takeInput`).
   */
  static async acquire(
    store: ChatStore,
    opts: {
      chatKey: string;
      owner: string;
      runId: string;
      leaseMs: number;
      logger: Logger;
      renewedElsewhere?: boolean;
      reads?: TurnReads;
    },
  ): Promise<Lane | { busyMs: number }> {
    const sentAt = Date.now();
    const mark = store.markWrite(opts.chatKey);
    const res = await store.acquire(opts.chatKey, opts.owner, opts.leaseMs, opts.reads);
    if (!res.ok) return { busyMs: res.ttlMs };
    // REDIS_REPLICA_ACKS: a fence the replicas lack could be handed out again by the promoted
    // one, and two turns would then hold the same fence. Unconfirmed, the turn gives the lease
    // back (fenced: a no-op if the fence is gone) and its job retries.
    try {
      await store.confirmWrite(mark);
    } catch (err) {
      await store.finish(opts.chatKey, res.fence, opts.owner, opts.runId).catch(() => undefined);
      throw err;
    }
    const lane = new Lane(
      mark,
      store,
      opts.chatKey,
      opts.owner,
      res.fence,
      opts.runId,
      opts.leaseMs,
      opts.logger,
      res.uncommitted,
      res.route,
      res.openReply,
      res.watched,
      res.input,
      sentAt,
    );
    if (!opts.renewedElsewhere) lane.startRenewing();
    return lane;
  }

  /** The turn's input read with the lease; once (the lane does not keep it for the whole turn). */
  takeInput(): TurnInput | undefined {
    const input = this.input;
    this.input = undefined;
    return input;
  }

  /** Another turn took the chat: nothing more may be written. (A step's timeout is not that.) */
  get lost(): boolean {
    return this.ended !== undefined && !this.stoppedHere && !this.stoppedByRequest && !this.failedHere;
  }

  /** This process stopped the turn (shutdown); the lease is still ours to release. */
  get stopped(): boolean {
    return this.stoppedHere;
  }

  /** Stop the turn from this side: the model call is aborted, the lease stays ours until release(). */
  stop(reason: string): void {
    if (this.ended) return;
    this.stoppedHere = true;
    this.logger.warn({ reason, fence: this.fence }, 'turn stopped');
    this.end(new TurnAbortedError(reason));
  }

  /** A stop was asked for (meta.stop names this fence): the model call ends, the turn commits what it did. */
  requestStop(): void {
    if (this.ended) return;
    this.logger.info({ fence: this.fence }, 'turn stop requested');
    this.end(new TurnAbortedError('stopped by request'), true);
  }

  /**
   * A write the turn cannot go on without failed, its outcome unknown (chat_send's outbox
   * write: Redis unreachable mid-failover, say). Handed to the model as a tool error, the
   * turn would commit a reply nobody received; instead it ends now with `err`, which settles
   * as the turn's failure (a Redis outage: the job retries, no attempt spent). The retry
   * finds the send among the chat's uncommitted sends if it was written.
   */
  failWrite(err: Error): void {
    if (this.ended) return;
    this.failedHere = true;
    this.logger.warn({ err, fence: this.fence }, 'turn ended: a write failed');
    this.end(err);
  }

  /** Called when any fenced write was rejected: stop the turn at once. */
  markLost(reason: string): void {
    if (!this.ended) {
      this.logger.warn({ reason, fence: this.fence }, 'lane lost');
      this.end(new Error(`lane lost: ${reason}`));
    }
    this.stopRenewing();
  }

  /**
   * Renew the lease if it is due (set at least `renewAfter(leaseMs)` ago), unless a renewal
   * is still in flight (against a Redis that hangs, checks must not pile up calls) or the
   * lane is done. A turn shorter than renewAfter never renews: its acquire set a lease that
   * outlasts it. Never rejects; resolves once a renewal it sent has settled. A check that
   * sends nothing allocates nothing (one shared settled promise): RunningTurns runs it for
   * every running turn twenty times a lease.
   */
  renewIfDue(now = Date.now()): Promise<void> {
    const due = this.renewalDue(now);
    if (!due) return NOTHING_SENT;
    return this.store.renew(due.chatKey, due.owner, due.fence, due.leaseMs, due.runId).then(
      (renewed) => this.renewalSettled(now, renewed),
      (err: unknown) => this.renewalSettled(now, undefined, err),
    );
  }

  /**
   * The renewal due now, marked in flight; undefined when none is (see `renewIfDue`).
   * RunningTurns sends the due renewals of all its lanes in one call and tells each lane how
   * its renewal went (`renewalSettled`).
   */
  renewalDue(now: number): LeaseRenewal | undefined {
    if (this.renewing || this.ending || this.lost) return undefined;
    if (now - this.leaseSetAt < renewAfter(this.leaseMs)) return undefined;
    this.renewing = true;
    return {
      chatKey: this.chatKey,
      owner: this.owner,
      fence: this.fence,
      leaseMs: this.leaseMs,
      runId: this.runId,
    };
  }

  /**
   * How the renewal sent at `sentAt` went: renewed, refused (another turn holds the chat: the
   * lane is lost), or failed with `err` (retried at the next check; if the lease ran out
   * meanwhile, the fence refuses that one and the turn aborts).
   */
  renewalSettled(sentAt: number, renewed: boolean | undefined, err?: unknown): void {
    this.renewing = false;
    if (renewed === true) this.leaseSetAt = sentAt;
    else if (renewed === false) this.markLost('renew rejected');
    else this.logger.warn({ err }, 'lease renewal failed');
  }

  private startRenewing(): void {
    this.timer = setInterval(() => void this.renewIfDue(), renewalInterval(this.leaseMs));
    this.timer.unref();
  }

  private stopRenewing(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * The turn sends its commit now: renew no more. A renewal sent after a commit that released
   * the lease would find no owner and be refused (a false fence.rejected); one already in
   * flight reaches Redis before the commit (one connection, in order). The turn ends after
   * its commit either way, well within the lease its last renewal set.
   */
  endRenewals(): void {
    this.ending = true;
    this.stopRenewing();
  }

  /** The turn's commit released the lease too (commit.lua with the owner): no finish to send. */
  committedAndReleased(pending: number): void {
    this.endRenewals();
    this.releasedWith = { ok: true, pending };
  }

  /**
   * Release the lease (fenced). Idempotent. Returns the number of pending messages. `usage`:
   * model calls no commit or fail wrote, recorded by the release that frees the lease.
   */
  async release(usage?: CallUsage[]): Promise<{ ok: boolean; pending: number }> {
    this.endRenewals();
    const done = this.releasedWith;
    this.releasedWith = { ok: false, pending: 0 };
    return done ?? this.store.finish(this.chatKey, this.fence, this.owner, this.runId, usage);
  }
}
