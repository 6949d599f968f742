"""Kubewarden installed as its Helm charts install it, for `make
kubewarden-test`: the objects that `helm install` of kubewarden-crds 1.27.0,
kubewarden-controller 5.13.0 (appVersion v1.35.0, release
`kubewarden-controller` in `kubewarden`, default values) and the RBAC of
kubewarden-defaults 3.13.0 create, translated by hand from the charts'
templates (Helm is not built here) and built as Python objects. What the
charts' Helm functions generate (the CA Secret `kubewarden-ca` and the
controller's webhook certificate) is made with openssl as they make it:
EC P-256, CN `kubewarden-controller-ca`, SAN `<service>.<namespace>.svc`.
Left out: the audit-scanner CronJob (off in this test: its image is not
built), telemetry, and the defaults chart's PolicyServer `default` (the
README's Quick start runs the policy on a PolicyServer of its own).
"""
import base64
import os
import subprocess

import yaml

NAMESPACE = "kubewarden"
RELEASE = "kubewarden-controller"
APP_VERSION = "v1.35.0"
CONTROLLER_IMAGE = f"ghcr.io/kubewarden/kubewarden-controller:{APP_VERSION}"
POLICY_SERVER_IMAGE = f"ghcr.io/kubewarden/policy-server:{APP_VERSION}"
WEBHOOK_SERVICE = f"{RELEASE}-webhook-service"
SELECTOR = {"app.kubernetes.io/name": "kubewarden-controller", "app.kubernetes.io/instance": RELEASE}
LABELS = {"helm.sh/chart": "kubewarden-controller-5.13.0", **SELECTOR, "app.kubernetes.io/version": APP_VERSION,
          "app.kubernetes.io/component": "controller", "app.kubernetes.io/managed-by": "Helm",
          "app.kubernetes.io/part-of": "kubewarden"}
KINDS = ("clusteradmissionpolicy", "clusteradmissionpolicygroup", "policyserver", "admissionpolicy",
         "admissionpolicygroup")
PLURALS = {"clusteradmissionpolicy": "clusteradmissionpolicies", "admissionpolicy": "admissionpolicies",
           "clusteradmissionpolicygroup": "clusteradmissionpolicygroups",
           "admissionpolicygroup": "admissionpolicygroups", "policyserver": "policyservers"}


def _rule(groups, resources, verbs):
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


CRUD = ["create", "delete", "get", "list", "patch", "update", "watch"]


def crds(folder):
    """The CRDs of kubewarden-crds (build-controller.sh copies them from the chart)."""
    found = []
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as f:
            found += [d for d in yaml.safe_load_all(f) if d]
    return found


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def certificates(folder):
    """(ca.crt, ca.key, tls.crt, tls.key) as PEM text, as the chart's
    genCAWithKey and genSignedCertWithKey make them (the controller reads
    the CA key as an EC private key)."""
    ca_key, ca_crt = os.path.join(folder, "kw-ca.key"), os.path.join(folder, "kw-ca.crt")
    key, csr, crt = (os.path.join(folder, f"kw-webhook.{ext}") for ext in ("key", "csr", "crt"))
    ext = os.path.join(folder, "kw-webhook.ext")
    dns = f"{WEBHOOK_SERVICE}.{NAMESPACE}.svc"
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", ca_key)
    _openssl("req", "-x509", "-new", "-key", ca_key, "-out", ca_crt, "-days", "3650",
             "-subj", "/CN=kubewarden-controller-ca")
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    _openssl("req", "-new", "-key", key, "-out", csr, "-subj", f"/CN={dns}")
    with open(ext, "w") as f:
        f.write(f"subjectAltName=DNS:{dns}\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
             "-days", "365", "-extfile", ext)
    return tuple(open(p).read() for p in (ca_crt, ca_key, crt, key))


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def controller(folder):
    """The kubewarden-controller chart's objects, in the order Helm applies them."""
    ca_crt, ca_key, tls_crt, tls_key = certificates(folder)
    ns = {"namespace": NAMESPACE}
    objects = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": RELEASE, **ns, "labels": LABELS}},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": "kubewarden-ca", **ns, "labels": LABELS},
         "data": {"ca.crt": _b64(ca_crt), "ca.key": _b64(ca_key)}},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
         "metadata": {"name": "kubewarden-webhook-server-cert", **ns, "labels": LABELS},
         "data": {"tls.crt": _b64(tls_crt), "tls.key": _b64(tls_key)}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "kubewarden-controller-manager", "labels": LABELS},
         "rules": [
             _rule(["admissionregistration.k8s.io"],
                   ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                   ["create", "delete", "get", "list", "patch", "watch"]),
             _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
             _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
             _rule(["policies.kubewarden.io"], sorted(PLURALS.values()), CRUD),
             _rule(["policies.kubewarden.io"], [f"{p}/finalizers" for p in sorted(PLURALS.values())], ["update"]),
             _rule(["policies.kubewarden.io"], [f"{p}/status" for p in sorted(PLURALS.values())],
                   ["get", "patch", "update"])]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "kubewarden-controller-manager", **ns, "labels": LABELS},
         "rules": [
             _rule([""], ["configmaps", "secrets", "services"], CRUD),
             _rule([""], ["events"], ["create", "patch"]),
             _rule([""], ["pods"], ["get", "list", "watch"]),
             _rule(["apps"], ["deployments"], CRUD),
             _rule(["apps"], ["replicasets"], ["get", "list", "watch"]),
             _rule(["coordination.k8s.io"], ["leases"], CRUD),
             _rule(["policy"], ["poddisruptionbudgets"], CRUD)]},
    ]
    subject = [{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}]
    for kind in ("ClusterRole", "Role"):
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding",
                   "metadata": {"name": "kubewarden-controller-manager", "labels": LABELS},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind,
                               "name": "kubewarden-controller-manager"},
                   "subjects": subject}
        if kind == "Role":
            binding["metadata"].update(ns)
        objects.append(binding)
    objects.append({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": WEBHOOK_SERVICE, **ns, "labels": LABELS},
                    "spec": {"ports": [{"port": 443, "targetPort": 9443, "protocol": "TCP"}], "selector": SELECTOR}})
    objects.append({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": RELEASE, **ns, "labels": LABELS},
        "spec": {"replicas": 1, "selector": {"matchLabels": SELECTOR},
                 "template": {"metadata": {"labels": LABELS}, "spec": {
                     "serviceAccountName": RELEASE,
                     "containers": [{
                         "name": "controller", "command": ["/controller"],
                         "args": ["--leader-elect", f"--deployments-namespace={NAMESPACE}",
                                  f"--webhook-service-name={WEBHOOK_SERVICE}",
                                  "--always-accept-admission-reviews-on-deployments-namespace",
                                  "--zap-log-level=info"],
                         "image": CONTROLLER_IMAGE, "imagePullPolicy": "IfNotPresent",
                         "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8081},
                                           "initialDelaySeconds": 15, "periodSeconds": 20},
                         "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081},
                                            "initialDelaySeconds": 5, "periodSeconds": 10},
                         "resources": {"limits": {"cpu": "500m", "memory": "200Mi"},
                                       "requests": {"cpu": "250m", "memory": "70Mi"}},
                         "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                         "volumeMounts": [{"mountPath": "/tmp/k8s-webhook-server/serving-certs", "name": "cert",
                                           "readOnly": True}],
                         "ports": [{"containerPort": 9443, "name": "webhook-server", "protocol": "TCP"}]}],
                     "volumes": [{"name": "cert", "secret": {"defaultMode": 420,
                                                             "secretName": "kubewarden-webhook-server-cert"}}],
                     "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                     "terminationGracePeriodSeconds": 10}}}})
    for prefix, kind in (("m", "Mutating"), ("v", "Validating")):
        verb = "mutate" if prefix == "m" else "validate"
        objects.append({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": f"{kind}WebhookConfiguration",
            "metadata": {"name": f"kubewarden-controller-{kind.lower()}-webhook-configuration", "labels": LABELS},
            "webhooks": [{
                "name": f"{prefix}{k}.kb.io", "admissionReviewVersions": ["v1", "v1beta1"],
                "clientConfig": {"caBundle": _b64(ca_crt), "service": {
                    "name": WEBHOOK_SERVICE, "namespace": NAMESPACE,
                    "path": f"/{verb}-policies-kubewarden-io-v1-{k}"}},
                "failurePolicy": "Fail", "sideEffects": "None",
                "rules": [{"apiGroups": ["policies.kubewarden.io"], "apiVersions": ["v1"],
                           "operations": ["CREATE", "UPDATE"], "resources": [PLURALS[k]]}]}
                for k in KINDS]})
    return objects


def defaults_rbac():
    """kubewarden-defaults' ServiceAccount `policy-server` and its context
    watcher role (default permissions: read namespaces, pods, services and
    ingresses; create subjectaccessreviews)."""
    labels = {"app.kubernetes.io/component": "policy-server", "app.kubernetes.io/part-of": "kubewarden"}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "policy-server", "namespace": NAMESPACE, "labels": labels}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "kubewarden-context-watcher", "labels": labels},
         "rules": [_rule([""], ["namespaces", "pods", "services"], ["get", "list", "watch"]),
                   _rule(["networking.k8s.io"], ["ingresses"], ["get", "list", "watch"]),
                   _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"])]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "kubewarden-context-watcher", "labels": labels},
         "subjects": [{"kind": "ServiceAccount", "name": "policy-server", "namespace": NAMESPACE}],
         "roleRef": {"kind": "ClusterRole", "name": "kubewarden-context-watcher",
                     "apiGroup": "rbac.authorization.k8s.io"}},
    ]
