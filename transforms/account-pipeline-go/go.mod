module account-pipeline-go

go 1.25

require sluice.dev/sluice v0.0.0

replace sluice.dev/sluice => ../../guest-sdk/go
