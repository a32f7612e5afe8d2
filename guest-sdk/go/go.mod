module sluice.dev/sluice

go 1.25
