//go:build tools

// The command tests/controlplane/build.py builds; importing it here keeps go.sum complete.
package tools

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
