import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, type IConfigMap, type IContainer, Namespace, Service } from 'kubernetes-models/v1';
import { parseAllDocuments } from 'yaml';

/**
 * deploy/kubernetes rendered by `kubectl kustomize` and checked offline: each object against
 * its schema (kubernetes-models and the KEDA and Prometheus Operator models), and what a
 * container's environment adds up to (ConfigMaps, the Secret, its own `env`).
 */

const root = fileURLToPath(new URL('../../', import.meta.url));

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: unknown;
  data?: Record<string, string>;
}

/** The rendered objects of a kustomization directory; fails loudly when kubectl is missing. */
export function render(dir: string): K8sObject[] {
  let out: string;
  try {
    out = execFileSync('kubectl', ['kustomize', `${root}${dir}`], { encoding: 'utf8', stdio: 'pipe' });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT')
      throw new Error(
        'kubectl is not installed: the Kubernetes manifests cannot be rendered (install kubectl)',
      );
    throw new Error(`kubectl kustomize ${dir} failed: ${e.stderr ?? e.message}`);
  }
  return parseAllDocuments(out).map((d) => d.toJS() as K8sObject);
}

/** The model that validates each kind the manifests may hold; any other kind is an error. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
};

/** Throws what the schema refuses, naming the object. */
export function validate(o: K8sObject): void {
  const Model = MODELS[`${o.apiVersion}/${o.kind}`];
  if (!Model) throw new Error(`${o.kind} ${o.metadata.name}: no schema known for ${o.apiVersion}`);
  try {
    new Model(o as never).validate();
  } catch (err) {
    throw new Error(`${o.kind} ${o.metadata.name}: ${(err as Error).message}`);
  }
}

export const ofKind = <T>(objects: K8sObject[], kind: string) =>
  objects.filter((o) => o.kind === kind) as unknown as Array<T & K8sObject>;

/** The keys of the Secret `chatlane` (deploy/kubernetes/secret.env.example), set or commented out. */
export function secretKeys(): { required: string[]; optional: string[] } {
  const text = readFileSync(`${root}deploy/kubernetes/secret.env.example`, 'utf8');
  const required = [...text.matchAll(/^([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]!);
  const optional = [...text.matchAll(/^# ([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]!);
  return { required, optional };
}

/** Stand-ins for the Secret's required keys, as valid as the real ones must be. */
export function secretValues(): Record<string, string> {
  const values: Record<string, string> = {};
  for (const key of secretKeys().required) {
    values[key] =
      key === 'REDIS_URL' ? 'redis://:password@redis:6379/0' : `${key.toLowerCase()}-`.padEnd(40, 'x');
  }
  return values;
}

/** A container's environment as the kubelet builds it (envFrom in order, then `env`), the Secret as `secret`. */
export function containerEnv(
  container: IContainer,
  objects: K8sObject[],
  secret: Record<string, string>,
): Record<string, string> {
  const maps = ofKind<IConfigMap>(objects, 'ConfigMap');
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) {
      const map = maps.find((m) => m.metadata.name === from.configMapRef!.name);
      if (!map) throw new Error(`${container.name}: no ConfigMap ${from.configMapRef.name}`);
      Object.assign(env, map.data);
    }
    if (from.secretRef) Object.assign(env, secret);
  }
  for (const e of container.env ?? []) {
    const key = e.valueFrom?.secretKeyRef?.key;
    const value = e.value ?? (key === undefined ? undefined : secret[key]);
    if (value !== undefined) env[e.name] = value;
  }
  return env;
}

/** The one container of each chatlane Deployment, by its role (its first argument). */
export function roles(
  objects: K8sObject[],
): Map<string, { deployment: IDeployment & K8sObject; container: IContainer }> {
  const out = new Map<string, { deployment: IDeployment & K8sObject; container: IContainer }>();
  for (const deployment of ofKind<IDeployment>(objects, 'Deployment')) {
    const containers = deployment.spec?.template.spec?.containers ?? [];
    if (containers.length !== 1) throw new Error(`${deployment.metadata.name}: one container expected`);
    out.set(String(containers[0]!.args?.[0]), { deployment, container: containers[0]! });
  }
  return out;
}
