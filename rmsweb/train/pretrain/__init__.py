"""Stage `pretrain`: generic web-agent skills for the tiny model, on synthetic pages."""
