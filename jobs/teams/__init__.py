"""What a team lead does for their team (jobs.models.Team.leads): the rules, apart from the pages
(jobs/web/views/teams.py) so that the API or a command could use them too. Every change is audited."""
