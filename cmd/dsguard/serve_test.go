package main

import (
	"net/netip"
	"slices"
	"testing"
)

func TestParseAddresses(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    []netip.Prefix
		wantErr bool
	}{
		{in: nil, want: nil},
		{in: []string{"10.0.0.5"}, want: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}},
		{in: []string{" 10.0.0.0/24 ", "fd00::1"}, want: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::1/128")}},
		{in: []string{"10.0.0.7/24"}, want: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}},
		{in: []string{"::ffff:10.0.0.5"}, want: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}},
		{in: []string{"kube-apiserver"}, wantErr: true},
		{in: []string{"10.0.0.0/33"}, wantErr: true},
	} {
		got, err := parseAddresses(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parseAddresses(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
