// The cert-manager controller and cainjector the e2e tests run, built by
// hack/tools.sh, which copies them into its wrapper module. cert-manager publishes its binaries' main packages as modules
// the Go module proxy does not serve, so these two small mains wire the
// controllers of the github.com/cert-manager/cert-manager module (which it does
// serve) the same way. This go.mod keeps them out of dsguard's module, whose
// go.mod stays free of the issuers' dependencies (ACME, Vault, Venafi clouds).
module dsguard.local/cert-manager-tools

go 1.26

require github.com/cert-manager/cert-manager v1.21.2
