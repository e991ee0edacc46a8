module github.com/weft-dev/weft

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/cockroachdb/datadriven v1.0.3
	github.com/spf13/cobra v1.10.2
	go.uber.org/goleak v1.3.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
