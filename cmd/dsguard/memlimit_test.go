package main

import "testing"

func TestSoftMemoryLimit(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    int64
		set     bool
		wantErr bool
	}{
		{name: "no limit", env: nil},
		{name: "256 MiB limit", env: map[string]string{memoryLimitEnv: "268435456"}, want: 241591860, set: true},
		{name: "GOMEMLIMIT set by hand wins", env: map[string]string{"GOMEMLIMIT": "100MiB", memoryLimitEnv: "268435456"}},
		{name: "not a number", env: map[string]string{memoryLimitEnv: "256Mi"}, wantErr: true},
		{name: "zero", env: map[string]string{memoryLimitEnv: "0"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, set, err := softMemoryLimit(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr || set != tt.set || got != tt.want {
				t.Errorf("softMemoryLimit() = %d, %v, %v; want %d, %v, error %v", got, set, err, tt.want, tt.set, tt.wantErr)
			}
		})
	}
}
