// Wrapper module: pins the releases whose published CustomResourceDefinitions the tests install
// (KServe's InferenceService, the Gateway API's routes and gateways). Nothing is built from it:
// tests/controlplane/build.py copies the CRD manifests out of these modules.
module kubelab.local/cluster/addons

go 1.26.0

require (
	github.com/kserve/kserve v0.17.0
	sigs.k8s.io/gateway-api v1.4.0
)
