-- current_setting: the value of server setting $1.
SELECT current_setting($1)
