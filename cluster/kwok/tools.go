//go:build tools

// The command scripts/build-cluster builds; importing it here keeps go.sum complete.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
