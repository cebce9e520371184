import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { IScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1';
import type { IServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1';
import type { IConfigMap, IContainer, IService } from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import { loadConfig, requireCompactionModel, requireModel } from '../../src/shared/config.js';
import { SHUTDOWN_BACKSTOP_MS } from '../../src/shared/process/grace.js';
import {
  containerEnv,
  type K8sObject,
  ofKind,
  render,
  roles,
  secretKeys,
  secretValues,
  validate,
} from '../helpers/kubernetes.js';
import { allowedAggregations, documentedExpressions, exportedNames, selectors } from '../helpers/promql.js';

/**
 * deploy/kubernetes: the base and both overlays render with `kubectl kustomize`, every object
 * passes its schema offline, and the invariants an operator relies on hold in each.
 */

const DIRS = ['deploy/kubernetes', 'deploy/kubernetes/overlays/small', 'deploy/kubernetes/overlays/large'];
const ROLES = ['ingress', 'worker', 'compactor', 'delivery'];
/** A key that names a credential, or a URL that may carry one: never in a ConfigMap. */
const SECRET_LIKE = /TOKEN|SECRET|PASSWORD|API_KEY|_KEY$|CREDENTIAL|^REDIS_URL$/;

const root = fileURLToPath(new URL('../../', import.meta.url));
const rendered = new Map(DIRS.map((dir) => [dir, render(dir)]));
const secret = secretValues();

const matches = (selector: Record<string, string> | undefined, labels: Record<string, string> | undefined) =>
  Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);

describe.each(DIRS)('kubectl kustomize %s', (dir) => {
  const objects = rendered.get(dir)!;
  const byRole = roles(objects);
  const envOf = (c: IContainer) => containerEnv(c, objects, secret);

  it('renders the four roles, the ingress Service and autoscaler, the worker ScaledObject, disruption budgets and a ServiceMonitor, all in one namespace', () => {
    expect([...byRole.keys()].sort()).toEqual([...ROLES].sort());
    const kinds = objects.map((o) => o.kind);
    for (const kind of ['Namespace', 'ConfigMap', 'Service', 'HorizontalPodAutoscaler', 'ScaledObject'])
      expect(kinds, kind).toContain(kind);
    expect(kinds.filter((k) => k === 'PodDisruptionBudget')).toHaveLength(4);
    expect(kinds.filter((k) => k === 'ServiceMonitor')).toHaveLength(1);
    const namespace = objects.find((o) => o.kind === 'Namespace')!.metadata.name;
    for (const o of objects.filter((o) => o.kind !== 'Namespace'))
      expect(o.metadata.namespace).toBe(namespace);
  });

  it('passes the Kubernetes, KEDA and Prometheus Operator schemas, object by object', () => {
    for (const o of objects) validate(o);
  });

  it('gives every role readiness on /readyz and liveness on /healthz, on the port the role serves them on', () => {
    for (const [role, { container }] of byRole) {
      const env = envOf(container);
      const portName = role === 'ingress' ? 'http' : 'metrics';
      const port = container.ports?.find((p) => p.name === portName)?.containerPort;
      // The ingress serves them on PORT, the other roles on their side port METRICS_PORT.
      expect(String(port), role).toBe(role === 'ingress' ? env.PORT : env.METRICS_PORT);
      expect(container.readinessProbe?.httpGet, role).toMatchObject({ path: '/readyz', port: portName });
      expect(container.livenessProbe?.httpGet, role).toMatchObject({ path: '/healthz', port: portName });
    }
  });

  it('runs every role as a non-root user with a read-only root filesystem and no privileges', () => {
    for (const [role, { deployment, container }] of byRole) {
      const pod = deployment.spec!.template.spec!;
      expect(pod.securityContext?.runAsNonRoot, role).toBe(true);
      expect(pod.securityContext?.runAsUser, role).toBeGreaterThan(0);
      expect(pod.automountServiceAccountToken, role).toBe(false);
      expect(container.securityContext, role).toMatchObject({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      expect(container.image, role).toMatch(/^[^:]+:(?!latest$)[\w.-]+$/);
      expect(container.resources?.requests?.cpu, role).toBeDefined();
      expect(container.resources?.requests?.memory, role).toBeDefined();
      expect(container.resources?.limits?.memory, role).toBeDefined();
    }
  });

  it('gives each pod longer to stop than its preStop pause, SHUTDOWN_GRACE_MS and the shutdown backstop together', () => {
    for (const [role, { deployment, container }] of byRole) {
      const grace = loadConfig(envOf(container)).SHUTDOWN_GRACE_MS;
      const sleep = container.lifecycle?.preStop?.exec?.command;
      const preStopMs = sleep?.[0] === 'sleep' ? Number(sleep[1]) * 1000 : 0;
      const periodMs = (deployment.spec!.template.spec!.terminationGracePeriodSeconds ?? 30) * 1000;
      expect(periodMs, role).toBeGreaterThan(preStopMs + grace + SHUTDOWN_BACKSTOP_MS);
    }
  });

  it('starts each role with a configuration chatlane accepts (the Secret’s keys stood in for)', () => {
    for (const [role, { container }] of byRole) {
      const config = loadConfig(envOf(container));
      if (role === 'worker') requireModel(config);
      if (role === 'compactor') requireCompactionModel(config);
    }
  });

  it('keeps every credential in the Secret: no secret-looking key or credentials in a URL in a ConfigMap, none as a plain env value', () => {
    for (const map of ofKind<IConfigMap>(objects, 'ConfigMap')) {
      for (const [key, value] of Object.entries(map.data ?? {})) {
        expect(key, `${map.metadata.name}: ${key}`).not.toMatch(SECRET_LIKE);
        expect(value, `${map.metadata.name}: ${key}`).not.toMatch(/:\/\/[^/\s]*@/);
      }
    }
    const { required, optional } = secretKeys();
    for (const [role, { container }] of byRole) {
      for (const e of container.env ?? [])
        if (SECRET_LIKE.test(e.name)) expect(e.value, `${role}: ${e.name}`).toBeUndefined();
      expect(
        container.envFrom?.some((f) => f.secretRef?.name === 'chatlane'),
        role,
      ).toBe(true);
    }
    expect(required).toEqual(expect.arrayContaining(['API_TOKEN', 'METRICS_TOKEN', 'REDIS_URL']));
    const monitor = ofKind<IServiceMonitor>(objects, 'ServiceMonitor')[0]!;
    for (const endpoint of monitor.spec.endpoints ?? []) {
      expect(endpoint.authorization?.credentials).toEqual({ name: 'chatlane', key: 'METRICS_TOKEN' });
      expect([...required, ...optional]).toContain(endpoint.authorization?.credentials?.key);
    }
  });

  it('scales the worker Deployment with KEDA on waiting + active turns, a PromQL query over metrics chatlane exports', async () => {
    const [scaled, ...others] = ofKind<IScaledObject>(objects, 'ScaledObject');
    expect(others).toHaveLength(0);
    const spec = scaled!.spec!;
    const worker = byRole.get('worker')!;
    expect(spec.scaleTargetRef.name).toBe(worker.deployment.metadata.name);
    expect(spec.scaleTargetRef.kind ?? 'Deployment').toBe('Deployment');
    // KEDA owns the count: a `replicas` in the manifest would fight it on every apply.
    expect(worker.deployment.spec?.replicas).toBeUndefined();
    expect(spec.minReplicaCount).toBeGreaterThanOrEqual(1);
    expect(spec.maxReplicaCount).toBeGreaterThanOrEqual(spec.minReplicaCount!);
    // Down slowly: a stabilization window, and removed workers drain (the grace test above).
    const down = spec.advanced?.horizontalPodAutoscalerConfig?.behavior?.scaleDown;
    expect(down?.stabilizationWindowSeconds).toBeGreaterThanOrEqual(60);

    const [trigger] = spec.triggers;
    expect(trigger?.type).toBe('prometheus');
    const query = String(trigger?.metadata.query);
    const { errors, found } = selectors(query);
    expect(errors, query).toBe(0);
    const names = await exportedNames();
    for (const s of found) {
      expect(names.has(s.metric), s.metric).toBe(true);
      expect(allowedAggregations(s.metric), `${s.metric} by ${s.aggregatedBy}`).toContain(s.aggregatedBy);
    }
    expect(query).toMatch(/queue="turns"/);
    expect(query).toMatch(/state=~"waiting\|active"/);
    expect(/namespace="([^"]+)"/.exec(query)?.[1]).toBe(scaled!.metadata.namespace);
    // docs/kubernetes.md shows the query the manifests hold.
    expect(documentedExpressions('docs/kubernetes.md')).toContain(query);
    // One worker per WORKER_CONCURRENCY waiting or active turns, not fewer slots than turns.
    const concurrency = loadConfig(envOf(worker.container)).WORKER_CONCURRENCY;
    expect(Number(trigger?.metadata.threshold)).toBeLessThanOrEqual(concurrency);
  });

  it('scales the ingress on CPU, serves it through its Service, covers every role with a disruption budget and scrapes every role', () => {
    const ingress = byRole.get('ingress')!;
    const [hpa] = ofKind<IHorizontalPodAutoscaler>(objects, 'HorizontalPodAutoscaler');
    expect(hpa?.spec?.scaleTargetRef).toMatchObject({
      kind: 'Deployment',
      name: ingress.deployment.metadata.name,
    });
    expect(hpa?.spec?.metrics?.[0]?.resource?.name).toBe('cpu');
    expect(ingress.deployment.spec?.replicas).toBeUndefined();

    const services = ofKind<IService>(objects, 'Service');
    const front = services.find((s) => s.metadata.name === 'chatlane-ingress')!;
    expect(matches(front.spec?.selector, ingress.deployment.spec?.template.metadata?.labels)).toBe(true);
    expect(front.spec?.ports?.[0]?.targetPort).toBe('http');

    const budgets = ofKind<IPodDisruptionBudget>(objects, 'PodDisruptionBudget');
    const monitor = ofKind<IServiceMonitor>(objects, 'ServiceMonitor')[0]!;
    const scrapedPorts = new Set((monitor.spec.endpoints ?? []).map((e) => e.port));
    for (const [role, { deployment, container }] of byRole) {
      const labels = deployment.spec?.template.metadata?.labels;
      expect(
        budgets.filter((b) => matches(b.spec?.selector?.matchLabels, labels)),
        role,
      ).toHaveLength(1);
      // Some Service the ServiceMonitor selects reaches this role on a port it scrapes, with /metrics there.
      const scraped = services.filter(
        (s) =>
          matches(monitor.spec.selector.matchLabels, s.metadata?.labels) &&
          matches(s.spec?.selector, labels) &&
          s.spec?.ports?.some(
            (p) => scrapedPorts.has(p.name) && container.ports?.some((c) => c.name === p.targetPort),
          ),
      );
      expect(scraped.length, role).toBeGreaterThan(0);
    }
  });
});

describe('the large overlay', () => {
  const objects = rendered.get('deploy/kubernetes/overlays/large')!;
  const worker = roles(objects).get('worker')!.container;

  it('shows the Sentinel variables, and they parse', () => {
    const config = loadConfig(containerEnv(worker, objects, secret));
    expect(config.REDIS_SENTINELS?.length).toBeGreaterThan(0);
    expect(config.REDIS_SENTINEL_NAME).toBeDefined();
  });

  it('shows the Cluster alternative beside them, which parses once it replaces the Sentinel lines', () => {
    const text = readFileSync(`${root}deploy/kubernetes/overlays/large/redis.env`, 'utf8');
    const nodes = /^# (REDIS_CLUSTER_NODES)=(.+)$/m.exec(text);
    expect(nodes).not.toBeNull();
    const env = containerEnv(worker, objects, secret);
    delete env.REDIS_SENTINELS;
    delete env.REDIS_SENTINEL_NAME;
    expect(
      loadConfig({ ...env, REDIS_CLUSTER_NODES: nodes![2]! }).REDIS_CLUSTER_NODES?.length,
    ).toBeGreaterThan(0);
  });
});

describe('the manifests’ objects checked', () => {
  it('fail the schema on a wrong type, so the validation is not a formality', () => {
    const objects = rendered.get('deploy/kubernetes')!;
    const scaled = structuredClone(objects.find((o) => o.kind === 'ScaledObject')!) as K8sObject &
      IScaledObject;
    (scaled.spec!.triggers[0]!.metadata as Record<string, unknown>).threshold = 32;
    expect(() => validate(scaled)).toThrow(/threshold must be string/);
    const deployment = structuredClone(objects.find((o) => o.kind === 'Deployment')!) as K8sObject & {
      spec: { template: { spec: { containers: Array<{ ports: Array<{ containerPort: unknown }> }> } } };
    };
    deployment.spec.template.spec.containers[0]!.ports[0]!.containerPort = 'http';
    expect(() => validate(deployment)).toThrow(/containerPort must be integer/);
  });
});
