"""Stage `mine`: failure-mode mining of the SFT policy's critical and fragile states."""
