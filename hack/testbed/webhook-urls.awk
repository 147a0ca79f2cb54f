# Rewrites a controller's own webhook configurations (JobSet's config/components/webhook, the trainer's
# manifests/base/webhook, rendered by kubectl kustomize) for the testbed, whose API servers have no
# Service routing: each webhook's clientConfig.service becomes url: BASE + its path, with caBundle: CA;
# other documents (a Service) are dropped; with -v prefix=P, the configurations' names get the prefix
# an install gives them (JobSet's "jobset-"). Rules, selectors and failure policies are left as the
# module has them.
#
# Usage: kubectl kustomize DIR | awk -v base=https://127.0.0.1:PORT -v ca=BASE64_PEM [-v prefix=P] -f webhook-urls.awk
function indent(s) { match(s, /^ */); return RLENGTH }
function end_service(  pad) {
  if (svc < 0) return
  pad = sprintf("%*s", svc, "")
  doc = doc pad "caBundle: " ca "\n" pad "url: " base path "\n"
  svc = -1
  path = ""
}
function end_doc() {
  end_service()
  if (doc ~ /(^|\n)kind: (Mutating|Validating)WebhookConfiguration\n/) {
    printf "%s%s", (docs++ ? "---\n" : ""), doc
  }
  doc = ""
  meta = 0
}
BEGIN {
  if (base == "" || ca == "") { print "webhook-urls.awk: set -v base=... and -v ca=..." > "/dev/stderr"; exit 2 }
  svc = -1
}
/^---$/ { end_doc(); next }
{
  if (svc >= 0) {
    if (indent($0) > svc) { if ($1 == "path:") path = $2; next }
    end_service()
  }
  if ($0 ~ /^[^ ]/) meta = ($0 == "metadata:")
  if (meta && $0 ~ /^  name: /) sub(/^  name: /, "  name: " prefix)
  if ($0 ~ /^ *service:$/) { svc = indent($0); next }
  doc = doc $0 "\n"
}
END { end_doc() }
